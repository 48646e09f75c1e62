// Package e2e holds the deployment and integration tests: they check the
// artifacts under deploy/ (systemd unit, Kubernetes manifests, Prometheus
// rules, Grafana dashboard), the Dockerfile's build, and run compactord
// against real servers started on loopback for the test: versitygw (S3),
// Azurite (Azure Blob Storage), fake-gcs-server (Cloud Storage) and the
// Debian prometheus server.
//
// Every test that needs an external tool skips with a message naming the
// install step when the tool is missing, except under CI=true, where it
// fails: CI must not silently lose coverage. .ci/run installs them all.
//
// The package has no non-test code besides this file.
package e2e
