# syntax=docker/dockerfile:1
#
# compactord image: a static binary on distroless, running as a non-root
# user. Build from the repository root:
#
#   docker build -t compactord:dev --build-arg VERSION=$(git describe --always --dirty) .
#
# internal/testing/e2e (TestDockerfile) checks the structure of this file and runs its
# build command to prove the result is a static binary.

# ---- build stage ----------------------------------------------------------
FROM golang:1.26-bookworm AS build
WORKDIR /src
# Dependencies first, so that source changes reuse the module layer.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
# CGO_ENABLED=0: no libc, no interpreter; the binary runs on scratch.
# -buildvcs=false: .git is not in the build context (.dockerignore).
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -buildvcs=false -ldflags "-s -w -X github.com/compactord/compactord/internal/cli.Version=${VERSION}" -o /out/compactord ./cmd/compactord

# ---- runtime stage --------------------------------------------------------
# distroless/static has CA certificates (for https object stores), tzdata and
# a nonroot user (65532), and no shell or package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/compactord /usr/local/bin/compactord
USER 65532:65532
EXPOSE 9464
ENTRYPOINT ["/usr/local/bin/compactord"]
CMD ["run", "--config", "/etc/compactord/compactord.yaml"]
