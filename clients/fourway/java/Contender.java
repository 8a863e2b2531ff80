import dev.redlockd.client.Lease;
import dev.redlockd.client.LockClient;
import dev.redlockd.client.RedlockdException;
import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.ThreadLocalRandom;

/**
 * The Java contender of the four-runtime test (clients/fourway/harness.py), run by the source
 * launcher on the classpath of clients/java's build: {@code java -cp CP Contender.java ADDRESS LOG
 * ROUNDS}.
 *
 * <p>Holds {@code fourway/shared} ROUNDS times through {@code LockClient.hold}. In each critical
 * section it appends {@code java <fence> start <ns>} to LOG, sleeps a few random milliseconds,
 * checks the lease and appends {@code java <fence> end <ns>} (or {@code lost}); after the release
 * it appends {@code unheld} if the daemon said the lock was no longer held. Each line is one
 * O_APPEND write. Times are {@code System.nanoTime()}, which HotSpot on Linux reads from
 * CLOCK_MONOTONIC, the clock the other three contenders read too (the harness checks it). A
 * retryable failure (UNAVAILABLE: masters slower than node_timeout on a starved machine) of {@code
 * hold} is retried, up to {@link #ATTEMPTS} times; a release that fails is reported on stderr and
 * left to the ttl (the section itself was done under the lock). Exits 1 if the lock was ever lost.
 */
public final class Contender {
  private static final String RUNTIME = "java";
  private static final String RESOURCE = "fourway/shared";
  /** Tries per section on retryable failures. */
  private static final int ATTEMPTS = 20;

  private Contender() {}

  public static void main(String[] args) throws IOException, InterruptedException {
    String address = args[0];
    int rounds = Integer.parseInt(args[2]);
    boolean lost = false;
    try (FileOutputStream log = new FileOutputStream(args[1], true);
        LockClient client = LockClient.builder(address).deadline(Duration.ofSeconds(90)).build()) {
      line(log, 0, "clock");
      for (int i = 0; i < rounds; i++) {
        Lease lease = null;
        for (int attempt = 1; lease == null; attempt++) {
          try {
            lease = client.hold(RESOURCE, Duration.ofSeconds(5), Duration.ofSeconds(60));
          } catch (RedlockdException e) {
            if (!e.isRetryable() || attempt == ATTEMPTS) {
              throw e;
            }
          }
        }
        long fence = lease.fence();
        line(log, fence, "start");
        Thread.sleep(ThreadLocalRandom.current().nextLong(5, 25));
        if (lease.isLost()) {
          line(log, fence, "lost");
          lost = true;
        } else {
          line(log, fence, "end");
        }
        // Not try-with-resources: close() after a failed release() would throw the same exception.
        try {
          if (!lease.release()) {
            line(log, fence, "unheld");
            lost = true;
          }
        } catch (RedlockdException e) {
          System.err.println("java contender: release: " + e.getMessage());
        }
        // Outside the lock: a pause that lets the other runtimes in.
        Thread.sleep(ThreadLocalRandom.current().nextLong(10, 30));
      }
    }
    System.exit(lost ? 1 : 0);
  }

  /** One line, one write(2) on a file opened for appending. */
  private static void line(FileOutputStream log, long fence, String what) throws IOException {
    String text = RUNTIME + " " + Long.toUnsignedString(fence) + " " + what + " " + System.nanoTime() + "\n";
    log.write(text.getBytes(StandardCharsets.UTF_8));
  }
}
