package e2e

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"

	"github.com/compactord/compactord/internal/testing/toolproc"
)

// Azurite's well-known development account (documented by Microsoft for
// the emulator; it guards nothing but a server on 127.0.0.1 that lives as
// long as one test).
const (
	azuriteAccount   = "devstoreaccount1"
	azuriteKey       = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	azuriteContainer = "compactord-test"
	azuriteInstall   = "make azurite (npm ci into tools/azurite, from internal/testing/e2e/testdata/azurite)"
)

// azuriteBinary finds azurite-blob installed by `make azurite`.
func azuriteBinary(t testing.TB) string {
	t.Helper()
	p, tried := toolproc.Find("azurite/node_modules/.bin/azurite-blob")
	if p == "" {
		skipOrFail(t, "azurite-blob not found (looked at %s); install it with: %s", strings.Join(tried, ", "), azuriteInstall)
	}
	if _, err := exec.LookPath("node"); err != nil {
		skipOrFail(t, "node not found in PATH (Azurite is a Node.js program); install it with: apt-get install -y nodejs")
	}
	return p
}

// azuriteServer is a running Azurite Blob service.
type azuriteServer struct {
	*proc
	endpoint string // http://127.0.0.1:PORT/devstoreaccount1
	host     string // 127.0.0.1:PORT
}

// azblobEnv is set process-wide once: gocloud's azblob opener reads the
// credential variables on first use and keeps them for the process.
var azblobEnv sync.Once

// startAzurite starts Azurite on a free loopback port with a fresh data
// directory, creates the test container, and stops it when t ends.
func startAzurite(t *testing.T) *azuriteServer {
	t.Helper()
	bin := azuriteBinary(t)
	azblobEnv.Do(func() {
		os.Setenv("AZURE_STORAGE_ACCOUNT", azuriteAccount)
		os.Setenv("AZURE_STORAGE_KEY", azuriteKey)
		for _, k := range []string{"AZURE_STORAGE_SAS_TOKEN", "AZURE_STORAGE_CONNECTION_STRING", "AZURE_STORAGEBLOB_CONNECTIONSTRING",
			"AZURE_STORAGE_DOMAIN", "AZURE_STORAGE_PROTOCOL", "AZURE_STORAGE_IS_CDN", "AZURE_STORAGE_IS_LOCAL_EMULATOR"} {
			os.Unsetenv(k)
		}
	})
	host := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	dir := t.TempDir()
	cmd := exec.Command(bin,
		"--blobHost", "127.0.0.1",
		"--blobPort", strings.TrimPrefix(host, "127.0.0.1:"),
		"--location", dir,
		"--skipApiVersionCheck",
		"--loose",
		"--silent")
	cmd.Dir = dir
	p := startProc(t, "azurite", cmd)
	p.kill = true
	s := &azuriteServer{proc: p, host: host, endpoint: "http://" + host + "/" + azuriteAccount}

	cred, err := azblob.NewSharedKeyCredential(azuriteAccount, azuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := azblob.NewClientWithSharedKeyCredential(s.endpoint+"/", cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Ready when the container exists: creating it is the first request
	// the service can only answer once it serves.
	waitFor(t, 60*time.Second, "azurite to create the container", p, func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := client.CreateContainer(ctx, azuriteContainer, nil)
		if err == nil || bloberror.HasCode(err, bloberror.ContainerAlreadyExists) {
			return true, ""
		}
		return false, err.Error()
	})
	return s
}

// URL is a gocloud azblob:// URL for a key prefix in the test container.
// gocloud v0.47's azureblob opener takes protocol and domain from the
// query; a domain starting with 127.0.0.1 makes it use path-style
// addressing (http://127.0.0.1:PORT/ACCOUNT/CONTAINER), as the emulator
// needs.
func (s *azuriteServer) URL(prefix string) string {
	q := url.Values{}
	q.Set("protocol", "http")
	q.Set("domain", s.host)
	u := url.URL{Scheme: "azblob", Host: azuriteContainer, Path: "/" + strings.Trim(prefix, "/"), RawQuery: q.Encode()}
	return u.String()
}
