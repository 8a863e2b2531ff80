# redlockd container image.
#
#   docker build -t redlockd .
#   docker run --rm redlockd --version
#
# Ports: 50051 gRPC (LockService, grpc.health.v1, reflection),
#        9464  Prometheus metrics (GET /metrics).
# Config: /etc/redlockd/redlockd.toml (mount your own; see config/redlockd.toml),
#         or environment variables REDLOCKD__<SECTION>__<KEY>.
#
# The dependency layer is planned by cargo-chef from the workspace's
# manifests (no hand-kept list of stub files to drift), so editing code
# rebuilds only the workspace's own crates. CI runs this file's build
# stages without a container engine: scripts/check-image-recipe.sh.

# --- build ---------------------------------------------------------------
FROM rust:1.95-slim-bookworm AS chef
RUN cargo install cargo-chef --locked --version 0.1.78
WORKDIR /src

FROM chef AS planner
COPY . .
RUN cargo chef prepare --recipe-path recipe.json

FROM chef AS build
COPY --from=planner /src/recipe.json recipe.json
# Build settings (mimalloc's lazy arena commit), and the patched crates the
# workspace's [patch.crates-io] points at (vendor/README.md): dependencies,
# built in this layer, that the recipe does not carry.
COPY .cargo ./.cargo
COPY vendor ./vendor
RUN cargo chef cook --profile dist --locked --no-default-features -p redlockd -p redlockctl --recipe-path recipe.json
COPY . .
# `dist`: no debug info, stripped. Without the `dev` feature: no --dev mode
# (no local masters in an image).
RUN cargo build --profile dist --locked --no-default-features -p redlockd -p redlockctl

# --- runtime -------------------------------------------------------------
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin redlockd
COPY --from=build /src/target/dist/redlockd /usr/local/bin/redlockd
COPY --from=build /src/target/dist/redlockctl /usr/local/bin/redlockctl
COPY config/redlockd.toml /etc/redlockd/redlockd.toml
USER 10001
# Listen beyond loopback inside the container; the port mapping decides who
# can reach it. REDLOCK_ADDR is where `redlockctl` (and so HEALTHCHECK) calls.
# MIMALLOC_PURGE_DELAY=0: mimalloc (v2, see Cargo.toml) gives freed pages
# back to the OS at once instead of after 10 ms (a compile-time default it
# does not offer, and the workspace forbids the unsafe call that sets it):
# 10,000 Hold sessions opened at once peak at 94 to 96 MB RSS instead of 96
# to 102 MB (docs/benchmarks.md, "The allocator"), with no throughput cost measured.
ENV REDLOCKD__SERVER__LISTEN=0.0.0.0:50051 \
    REDLOCKD__METRICS__LISTEN=0.0.0.0:9464 \
    REDLOCK_ADDR=http://127.0.0.1:50051 \
    MIMALLOC_PURGE_DELAY=0
EXPOSE 50051 9464
# Healthy only while the daemon serves locks (a quorum of trusted masters).
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/redlockctl", "--timeout", "2s", "health"]
ENTRYPOINT ["/usr/local/bin/redlockd"]
CMD ["--config", "/etc/redlockd/redlockd.toml"]
