# redlockd container image.
#
#   docker build -t redlockd .
#   docker run --rm redlockd --version
#
# Ports: 50051 gRPC (LockService, grpc.health.v1, reflection),
#        9464  Prometheus metrics (GET /metrics).
# Config: /etc/redlockd/redlockd.toml (mount your own; see config/redlockd.toml),
#         or environment variables REDLOCKD__<SECTION>__<KEY>.

# --- build ---------------------------------------------------------------
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src

# Dependency layer: build the dependencies against stub sources first, so
# that editing src/ does not rebuild them.
COPY Cargo.toml Cargo.lock build.rs ./
# Build settings (mimalloc's lazy arena commit).
COPY .cargo ./.cargo
COPY proto ./proto
RUN mkdir -p src/bin/redlockctl src/bin \
 && echo 'fn main() {}' > src/main.rs \
 && echo 'fn main() {}' > src/bin/redlockctl/main.rs \
 && echo 'fn main() {}' > src/bin/redlockd-bench.rs \
 && echo '' > src/lib.rs \
 && cargo build --release --locked \
 && rm -rf src

COPY src ./src
COPY config ./config
# Touch so cargo notices the real sources are newer than the stubs.
RUN touch src/main.rs src/lib.rs && cargo build --release --locked --bin redlockd --bin redlockctl

# --- runtime -------------------------------------------------------------
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --no-create-home --shell /usr/sbin/nologin redlockd
COPY --from=build /src/target/release/redlockd /usr/local/bin/redlockd
COPY --from=build /src/target/release/redlockctl /usr/local/bin/redlockctl
COPY config/redlockd.toml /etc/redlockd/redlockd.toml
USER 10001
# Listen beyond loopback inside the container; the port mapping decides who
# can reach it.
ENV REDLOCKD__SERVER__LISTEN=0.0.0.0:50051 \
    REDLOCKD__METRICS__LISTEN=0.0.0.0:9464
EXPOSE 50051 9464
ENTRYPOINT ["/usr/local/bin/redlockd"]
CMD ["--config", "/etc/redlockd/redlockd.toml"]
