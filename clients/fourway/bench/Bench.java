import dev.redlockd.client.LockClient;
import io.grpc.Deadline;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import redlock.v1.LockOuterClass.AcquireRequest;
import redlock.v1.LockOuterClass.ReleaseRequest;
import redlock.v1.LockServiceGrpc;

/**
 * Java's row of scripts/bench-clients.sh: what {@link LockClient} costs beside a raw blocking stub
 * on the same contract, against a running daemon. Prints one JSON line per way; asserts nothing.
 * Method: see bench.py beside it (warm-up, ROUNDS alternating runs of C=1 and of C=64 with 64
 * threads, medians). Run by the source launcher on clients/java's classpath: {@code java -cp CP
 * Bench.java ADDRESS SECONDS ROUNDS}.
 */
public final class Bench {
  private static final Duration TTL = Duration.ofSeconds(10);

  private Bench() {}

  public static void main(String[] args) throws Exception {
    String address = args[0];
    long nanos = (long) (Double.parseDouble(args[1]) * 1e9);
    int rounds = Integer.parseInt(args[2]);
    ManagedChannel channel =
        Grpc.newChannelBuilder(address, InsecureChannelCredentials.create()).build();
    try (LockClient client = LockClient.builder(address).build()) {
      Map<String, Consumer<String>> ways = new LinkedHashMap<>();
      ways.put("raw", resource -> rawCycle(channel, resource));
      ways.put("client", resource -> client.release(client.acquire(resource, TTL)));
      for (var way : ways.entrySet()) {
        for (int i = 0; i < 50; i++) {
          way.getValue().accept("bench/java/warm/" + way.getKey());
        }
      }
      Map<String, List<Double>> p50 = new LinkedHashMap<>();
      Map<String, List<Double>> rate = new LinkedHashMap<>();
      Map<String, Long> failed = new LinkedHashMap<>();
      for (String name : ways.keySet()) {
        p50.put(name, new ArrayList<>());
        rate.put(name, new ArrayList<>());
        failed.put(name, 0L);
      }
      for (int r = 0; r < rounds; r++) {
        for (var way : ways.entrySet()) {
          p50.get(way.getKey()).add(c1(way.getValue(), "bench/java/c1/" + way.getKey(), nanos));
        }
      }
      for (int r = 0; r < rounds; r++) {
        for (var way : ways.entrySet()) {
          AtomicLong fails = new AtomicLong();
          rate.get(way.getKey()).add(c64(way.getValue(), "bench/java/c64/" + way.getKey(), nanos, fails));
          failed.merge(way.getKey(), fails.get(), Long::sum);
        }
      }
      for (String name : ways.keySet()) {
        System.out.printf(
            Locale.ROOT,
            "{\"lang\": \"java\", \"way\": \"%s\", \"c1_p50_ms\": %.4f, \"c64_cycles_per_s\": %.1f, \"c64_failed\": %d}%n",
            name,
            median(p50.get(name)),
            median(rate.get(name)),
            failed.get(name));
      }
    } finally {
      channel.shutdownNow();
    }
  }

  private static void rawCycle(ManagedChannel channel, String resource) {
    var lock =
        LockServiceGrpc.newBlockingStub(channel)
            .withDeadline(Deadline.after(10, TimeUnit.SECONDS))
            .acquire(
                AcquireRequest.newBuilder()
                    .setResource(resource)
                    .setTtl(com.google.protobuf.Duration.newBuilder().setSeconds(TTL.getSeconds()))
                    .build())
            .getLock();
    LockServiceGrpc.newBlockingStub(channel)
        .withDeadline(Deadline.after(10, TimeUnit.SECONDS))
        .release(ReleaseRequest.newBuilder().setResource(resource).setToken(lock.getToken()).build());
  }

  private static double median(List<Double> xs) {
    double[] s = xs.stream().mapToDouble(Double::doubleValue).sorted().toArray();
    return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
  }

  /** Cycles one after another for {@code nanos}; the p50 of a cycle, in milliseconds. */
  private static double c1(Consumer<String> cycle, String resource, long nanos) {
    long end = System.nanoTime() + nanos;
    List<Double> took = new ArrayList<>();
    while (System.nanoTime() < end) {
      long started = System.nanoTime();
      cycle.accept(resource);
      took.add((System.nanoTime() - started) / 1e6);
    }
    return median(took);
  }

  /** 64 threads, each cycling on its own resource for {@code nanos}; cycles per second. */
  private static double c64(Consumer<String> cycle, String prefix, long nanos, AtomicLong fails)
      throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(64);
    try {
      long started = System.nanoTime();
      long end = started + nanos;
      List<Future<Long>> counts = new ArrayList<>();
      for (int i = 0; i < 64; i++) {
        String resource = prefix + "/" + i;
        counts.add(
            pool.submit(
                () -> {
                  long n = 0;
                  while (System.nanoTime() < end) {
                    try {
                      cycle.accept(resource);
                      n++;
                    } catch (RuntimeException e) {
                      fails.incrementAndGet(); // counted, not hidden
                    }
                  }
                  return n;
                }));
      }
      long total = 0;
      for (Future<Long> count : counts) {
        total += count.get();
      }
      return total / ((System.nanoTime() - started) / 1e9);
    } finally {
      pool.shutdownNow();
    }
  }
}
