# syntax=docker/dockerfile:1
# flock-apiserver: a static binary on a distroless, non-root base.
#
#   docker build -t <registry>/flock-apiserver:<tag> .
#   docker buildx build --platform linux/amd64,linux/arm64 -t <registry>/flock-apiserver:<tag> --push .
#
# The build stage needs only go.mod, go.sum, cmd/ and pkg/ (see .dockerignore).

ARG GO_VERSION=1.26

# ---- build ------------------------------------------------------------------
FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-bookworm AS build
ARG TARGETOS=linux
ARG TARGETARCH
WORKDIR /src
ENV CGO_ENABLED=0 GOFLAGS=-mod=readonly
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod \
    go mod download
COPY cmd/ cmd/
COPY pkg/ pkg/
# Pure Go (CGO_ENABLED=0): the binary is static and runs on an image with no
# libc. -trimpath keeps build paths out of it.
RUN --mount=type=cache,target=/go/pkg/mod \
    --mount=type=cache,target=/root/.cache/go-build \
    GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/flock-apiserver ./cmd/flock-apiserver
# The embedded etcd's default data directory, owned by the runtime user (the
# run stage has no shell to create it).
RUN mkdir -p /out/data/var/lib/flock-apiserver

# ---- run --------------------------------------------------------------------
# distroless/static: CA certificates, tzdata and /etc/passwd with the nonroot
# user (65532), nothing else: no shell, no package manager.
FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/flock-apiserver /usr/local/bin/flock-apiserver
COPY --from=build --chown=65532:65532 /out/data/var/lib/flock-apiserver /var/lib/flock-apiserver
# The same numeric user the Deployment's securityContext asks for
# (runAsNonRoot needs a numeric USER to verify).
USER 65532:65532
# The embedded etcd keeps its data here unless --embedded-etcd-data-dir or
# --etcd-servers says otherwise; mount a volume on it.
VOLUME ["/var/lib/flock-apiserver"]
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/flock-apiserver"]
