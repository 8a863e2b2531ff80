package dev.redlockd.client;

import io.grpc.Deadline;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import redlock.v1.LockOuterClass.AcquireRequest;
import redlock.v1.LockOuterClass.ReleaseRequest;
import redlock.v1.LockServiceGrpc;

/**
 * What the client costs over the raw generated stub, against one real daemon (started as the
 * tests start it, with five masters): acquire+release cycles at concurrency 1 (p50, p99 of a
 * cycle) and at concurrency 64 (cycles per second), each through {@link LockClient} and through a
 * raw blocking stub on the same contract. Prints figures; asserts nothing. Not run by {@code mvn
 * verify}.
 *
 * <p>Usage (from clients/java): {@code mvn -q -Dmaven.repo.local=../../target/m2 test-compile
 * exec:java -Dexec.args=SECONDS_PER_RUN}. REDLOCKD_BIN picks the daemon (default
 * target/debug/redlockd: a debug build; use a release build for figures worth quoting).
 */
public final class Bench {
  private static final Duration TTL = Duration.ofSeconds(10);

  private Bench() {}

  /** Runs the benchmark; {@code args[0]}: seconds per run (default 3). */
  public static void main(String[] args) throws Exception {
    long seconds = args.length > 0 ? Long.parseLong(args[0]) : 3;
    try (Daemon daemon = Daemon.start();
        LockClient client = LockClient.builder(daemon.address).build()) {
      ManagedChannel channel =
          Grpc.newChannelBuilder(daemon.address, InsecureChannelCredentials.create()).build();
      try {
        Consumer<String> viaClient = resource -> client.release(client.acquire(resource, TTL));
        Consumer<String> viaRaw = resource -> rawCycle(channel, resource);
        // Warm both paths (JIT, connections) before measuring.
        concurrency1(viaRaw, "bench/warm", 1);
        concurrency1(viaClient, "bench/warm", 1);
        System.out.println("acquire+release cycles, " + seconds + " s per run, daemon " + daemon.address);
        for (String way : List.of("raw", "client")) {
          Consumer<String> cycle = way.equals("raw") ? viaRaw : viaClient;
          long[] latencies = concurrency1(cycle, "bench/c1/" + way, seconds);
          System.out.printf(
              Locale.ROOT,
              "C=1  %-6s cycles %6d  p50 %7.3f ms  p99 %7.3f ms%n",
              way,
              latencies.length,
              percentile(latencies, 0.50) / 1e6,
              percentile(latencies, 0.99) / 1e6);
        }
        for (String way : List.of("raw", "client")) {
          Consumer<String> cycle = way.equals("raw") ? viaRaw : viaClient;
          double rate = concurrency64(cycle, "bench/c64/" + way, seconds);
          System.out.printf(Locale.ROOT, "C=64 %-6s %9.1f cycles/s%n", way, rate);
        }
      } finally {
        channel.shutdownNow();
      }
    }
  }

  private static void rawCycle(ManagedChannel channel, String resource) {
    LockServiceGrpc.LockServiceBlockingStub stub =
        LockServiceGrpc.newBlockingStub(channel)
            .withDeadline(Deadline.after(10, TimeUnit.SECONDS));
    var lock =
        stub.acquire(
                AcquireRequest.newBuilder()
                    .setResource(resource)
                    .setTtl(com.google.protobuf.Duration.newBuilder().setSeconds(TTL.getSeconds()))
                    .build())
            .getLock();
    LockServiceGrpc.newBlockingStub(channel)
        .withDeadline(Deadline.after(10, TimeUnit.SECONDS))
        .release(
            ReleaseRequest.newBuilder().setResource(resource).setToken(lock.getToken()).build());
  }

  /** Cycles one after another for {@code seconds}; the nanoseconds of each. */
  private static long[] concurrency1(Consumer<String> cycle, String resource, long seconds) {
    long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
    List<Long> latencies = new ArrayList<>();
    while (System.nanoTime() < end) {
      long started = System.nanoTime();
      cycle.accept(resource);
      latencies.add(System.nanoTime() - started);
    }
    long[] out = latencies.stream().mapToLong(Long::longValue).toArray();
    Arrays.sort(out);
    return out;
  }

  /** 64 workers, each cycling on its own resource for {@code seconds}; cycles per second. */
  private static double concurrency64(Consumer<String> cycle, String prefix, long seconds)
      throws Exception {
    int workers = 64;
    ExecutorService pool = Executors.newFixedThreadPool(workers);
    try {
      long started = System.nanoTime();
      long end = started + TimeUnit.SECONDS.toNanos(seconds);
      List<Future<Long>> counts = new ArrayList<>();
      for (int i = 0; i < workers; i++) {
        String resource = prefix + "/" + i;
        counts.add(
            pool.submit(
                () -> {
                  long n = 0;
                  while (System.nanoTime() < end) {
                    cycle.accept(resource);
                    n++;
                  }
                  return n;
                }));
      }
      long total = 0;
      for (Future<Long> count : counts) {
        total += count.get(seconds + 60, TimeUnit.SECONDS);
      }
      return total / ((System.nanoTime() - started) / 1e9);
    } finally {
      pool.shutdownNow();
    }
  }

  private static double percentile(long[] sorted, double q) {
    if (sorted.length == 0) {
      return Double.NaN;
    }
    return sorted[Math.min(sorted.length - 1, (int) Math.floor(q * sorted.length))];
  }
}
