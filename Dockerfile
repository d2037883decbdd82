# syntax=docker/dockerfile:1
# The operator image: a static binary on distroless, running as non-root.
# `make image` builds the same image without Docker (hack/image, on a base
# made like distroless static :nonroot); hack/image's test compares the two
# (build command, binary path, user, entrypoint, the base's files).
#   docker build --build-arg VERSION=v0.1.0 -t ghcr.io/podset-dev/podset-operator:v0.1.0 .
# Multi-arch (the builder cross-compiles natively):
#   docker buildx build --platform linux/amd64,linux/arm64 -t ... .

FROM --platform=$BUILDPLATFORM golang:1.26 AS builder
ARG TARGETOS
ARG TARGETARCH
# The release stamped into the binary (podset-operator --version).
ARG VERSION=dev
WORKDIR /src
# Modules first: this layer is reused until go.mod or go.sum change.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Empty when not building with buildx, which makes Go build for the host.
ENV GOOS=$TARGETOS GOARCH=$TARGETARCH
# test/e2e runs this exact command (with its own VERSION and output path).
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=${VERSION}" -o /out/podset-operator .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=builder /out/podset-operator /podset-operator
USER 65532:65532
ENTRYPOINT ["/podset-operator"]
