package daemon

import (
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/pprof"
	"net/url"
	"strings"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.uber.org/zap"

	"github.com/compactord/compactord/internal/scheduler"
)

// Handler serves the daemon's endpoints: metrics, health, status and the
// admin API.
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{Registry: d.reg}))
	mux.HandleFunc("GET /-/healthy", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("OK\n"))
	})
	mux.HandleFunc("GET /-/ready", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !d.Ready() {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready: the first table sync has not finished, or shutting down\n"))
			return
		}
		_, _ = w.Write([]byte("OK\n"))
	})
	mux.HandleFunc("GET /api/v1/tables", func(w http.ResponseWriter, _ *http.Request) {
		d.mu.Lock()
		derr := d.discoverErr
		d.mu.Unlock()
		writeJSON(w, http.StatusOK, map[string]any{
			"instance": map[string]any{"holder": d.sched.Holder(), "members": d.sched.Members(), "version": d.deps.Version,
				"revision": d.deps.Build.Revision, "ready": d.Ready(), "discover_error": derr},
			"tables": d.sched.Tables(),
		})
	})
	mux.HandleFunc("GET /api/v1/tables/{name}", func(w http.ResponseWriter, r *http.Request) {
		st, ok := d.sched.Table(r.PathValue("name"))
		if !ok {
			writeError(w, &scheduler.APIError{Status: http.StatusNotFound, Msg: "no table named " + quote(r.PathValue("name"))})
			return
		}
		writeJSON(w, http.StatusOK, tableDetail{TableStatus: st, Policy: d.jobsCfg.Load().PolicyFor(st.Name)})
	})
	mux.Handle("POST /api/v1/tables/{name}/jobs/{kind}", d.admin(func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		kind, err := scheduler.ParseKind(r.PathValue("kind"))
		if err != nil {
			writeError(w, &scheduler.APIError{Status: http.StatusBadRequest, Msg: err.Error()})
			return
		}
		if err := d.sched.Trigger(name, kind); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"table": name, "kind": string(kind), "status": "queued"})
	}))
	// Pause writes the pause mark into the table's bucket, so any
	// instance may be asked and every one honours it (?reason= says why).
	mux.Handle("POST /api/v1/tables/{name}/pause", d.admin(func(w http.ResponseWriter, r *http.Request) {
		d.control(w, r.PathValue("name"), func(name string) error {
			return d.sched.Pause(r.Context(), name, r.URL.Query().Get("reason"))
		})
	}))
	mux.Handle("POST /api/v1/tables/{name}/resume", d.admin(func(w http.ResponseWriter, r *http.Request) {
		d.control(w, r.PathValue("name"), func(name string) error { return d.sched.Resume(r.Context(), name) })
	}))
	// A reload, as SIGHUP does; the answer says whether it applied.
	mux.Handle("POST /-/reload", d.admin(func(w http.ResponseWriter, _ *http.Request) {
		res, err := d.ReloadReport()
		if err != nil {
			status := http.StatusInternalServerError
			var ce *ConfigError
			if errors.As(err, &ce) {
				status = http.StatusBadRequest
			}
			writeJSON(w, status, map[string]string{"error": "reload failed; the running configuration stays: " + err.Error()})
			return
		}
		body := map[string]any{"status": "reloaded", "tables": res.Tables}
		if len(res.NeedRestart) > 0 {
			// Applied in part: the operator who asked must learn that
			// some settings wait for a restart, not only the log.
			body["need_restart"] = res.NeedRestart
			body["message"] = "reloaded, except what needs a restart to apply: " + strings.Join(res.NeedRestart, "; ")
		}
		writeJSON(w, http.StatusOK, body)
	}))
	// Go's profiler, for operators chasing memory or CPU: it reveals the
	// process's internals (command line, stacks), so it sits behind the
	// admin guard.
	mux.Handle("GET /debug/pprof/", d.admin(pprof.Index))
	mux.Handle("GET /debug/pprof/cmdline", d.admin(pprof.Cmdline))
	mux.Handle("GET /debug/pprof/profile", d.admin(pprof.Profile))
	mux.Handle("GET /debug/pprof/symbol", d.admin(pprof.Symbol))
	mux.Handle("GET /debug/pprof/trace", d.admin(pprof.Trace))
	mux.HandleFunc("GET /{$}", d.statusPage)
	return mux
}

// tableDetail is a table's status with its effective policy: every
// overridable setting, its value and where it came from.
type tableDetail struct {
	scheduler.TableStatus
	Policy Policy `json:"policy"`
}

func (d *Daemon) control(w http.ResponseWriter, name string, fn func(string) error) {
	if err := fn(name); err != nil {
		writeError(w, err)
		return
	}
	st, _ := d.sched.Table(name)
	writeJSON(w, http.StatusOK, st)
}

// admin guards the admin API. With a token, a request needs
// `Authorization: Bearer <token>`. Without one (loopback by default), a
// browser request from another origin is refused: a page on any site
// could otherwise POST to 127.0.0.1 from the operator's browser.
func (d *Daemon) admin(next http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := *d.token.Load()
		if tok != "" {
			got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
			if !ok || subtle.ConstantTimeCompare([]byte(strings.TrimSpace(got)), []byte(tok)) != 1 {
				w.Header().Set("WWW-Authenticate", `Bearer realm="compactord"`)
				writeError(w, &scheduler.APIError{Status: http.StatusUnauthorized, Msg: "the admin API needs a valid bearer token"})
				return
			}
		} else if o := r.Header.Get("Origin"); o != "" {
			if u, err := url.Parse(o); err != nil || u.Host != r.Host {
				writeError(w, &scheduler.APIError{Status: http.StatusForbidden, Msg: "cross-origin requests to the admin API are refused"})
				return
			}
		}
		d.logger.Info("admin request", zap.String("method", r.Method), zap.String("path", r.URL.Path), zap.String("remote", r.RemoteAddr))
		next(w, r)
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var ae *scheduler.APIError
	if errors.As(err, &ae) {
		status = ae.Status
	}
	writeJSON(w, status, map[string]string{"error": err.Error()})
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
