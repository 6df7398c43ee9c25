# syntax=docker/dockerfile:1
# The pastebin image: one binary that runs any part (`key-service`, `paste-service`,
# `gateway`, `sweeper`, `ctl`, `up`, ...), as a non-root user on a slim Debian base.
# Build: docker build -t pastebin .      Run: docker run --rm pastebin gateway --help
# See docs/deployment.md.

ARG RUST_VERSION=1.95
ARG DEBIAN_RELEASE=bookworm

FROM rust:${RUST_VERSION}-slim-${DEBIAN_RELEASE} AS build
WORKDIR /src
# Only what the build reads (see .dockerignore): the lock file pins every dependency.
COPY Cargo.toml Cargo.lock rustfmt.toml ./
COPY crates crates
COPY proto proto
COPY migrations migrations
COPY tests tests
RUN --mount=type=cache,target=/usr/local/cargo/registry,sharing=locked \
    --mount=type=cache,target=/src/target,sharing=locked \
    cargo build --release --locked -p pastebin \
    && install -D -m 0755 target/release/pastebin /out/pastebin

FROM debian:${DEBIAN_RELEASE}-slim AS runtime
# ca-certificates: the S3 client verifies a real object store's TLS certificate.
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates=20230311* \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 pastebin \
    && useradd --system --uid 10001 --gid pastebin --home-dir /var/lib/pastebin --create-home pastebin
COPY --from=build /out/pastebin /usr/local/bin/pastebin
USER 10001:10001
WORKDIR /var/lib/pastebin
# Every part serves /healthz and /readyz (and /metrics) on its admin listener.
ENV PASTEBIN_ADMIN=0.0.0.0:9090
# gateway HTTP, gateway gRPC, K/P gRPC, admin listener.
EXPOSE 8080 50051 50061 9090
# Liveness: the binary asks its own admin listener; no shell, no curl in the image.
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
    CMD ["/usr/local/bin/pastebin", "healthcheck", "--url", "http://127.0.0.1:9090/healthz"]
ENTRYPOINT ["/usr/local/bin/pastebin"]
CMD ["--help"]
