package dev.redlockd.client;

import io.grpc.ChannelCredentials;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.stream.Collectors;
import java.util.stream.Stream;

/**
 * Test helper: five real valkey-server masters on free 127.0.0.1 ports and one real redlockd over
 * them, configured as operators configure it (REDLOCKD__SECTION__KEY variables, and a TOML file
 * for what variables cannot say, such as [[auth.clients]]). {@link #start} returns once the daemon
 * answers calls; {@link #close()} tears everything down.
 *
 * <p>Binaries: $REDLOCKD_VALKEY_BIN (after {@code source .venv/redlockd-env}), else valkey-server
 * on PATH; $REDLOCKD_BIN, else {@code <repo>/target/debug/redlockd}.
 */
final class Daemon implements AutoCloseable {
  /** Longest wait for a process to listen or the daemon to serve. */
  static final Duration START_LIMIT = Duration.ofSeconds(30);

  /** The masters, in the order given to the daemon. */
  final List<Master> masters;
  /** {@code 127.0.0.1:port} of the daemon. */
  final String address;
  /** Scratch directory: logs, configuration. */
  final Path dir;

  private final Process process;

  private Daemon(List<Master> masters, String address, Path dir, Process process) {
    this.masters = masters;
    this.address = address;
    this.dir = dir;
    this.process = process;
  }

  /** The repository's root (set by the pom; else two levels above the working directory). */
  static Path repo() {
    String configured = System.getProperty("redlockd.repo");
    Path base = configured != null ? Path.of(configured) : Path.of("..", "..");
    return base.toAbsolutePath().normalize();
  }

  /** A TCP port on 127.0.0.1 that was free a moment ago. */
  static int freePort() {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  /** Starts masters and a daemon with the default settings. */
  static Daemon start() throws Exception {
    return start(Map.of(), null, InsecureChannelCredentials.create());
  }

  /**
   * Starts five masters and a daemon. {@code settings}: extra configuration keys as in
   * config/redlockd.toml ({@code server.tls.cert}); {@code toml}: text of a configuration file
   * (or null); {@code probe}: the credentials the readiness probe connects with (TLS).
   */
  static Daemon start(
      Map<String, String> settings,
      String toml,
      ChannelCredentials probe)
      throws Exception {
    Path dir = Files.createTempDirectory("redlockd-java-client-");
    String valkey = System.getenv().getOrDefault("REDLOCKD_VALKEY_BIN", "valkey-server");
    List<Master> masters = new ArrayList<>();
    try {
      for (int i = 0; i < 5; i++) {
        masters.add(new Master(valkey, dir, freePort()));
      }
      for (Master master : masters) {
        master.awaitListening();
      }
    } catch (Exception e) {
      masters.forEach(Master::stop);
      throw new IllegalStateException(
          "masters (" + valkey + "; source .venv/redlockd-env first): " + e.getMessage(), e);
    }
    int port = freePort();
    Map<String, String> all = new LinkedHashMap<>();
    all.put("redlock.nodes", masters.stream().map(m -> m.url).collect(Collectors.joining(",")));
    // Wider than the daemon's default test setting: the machine running CI is shared and busy.
    all.put("redlock.node_timeout", "250ms");
    all.put("server.listen", "127.0.0.1:" + port);
    all.put("metrics.enabled", "false");
    // A stop drains open sessions for shutdown_grace (20 s by default).
    all.put("server.shutdown_grace", "1s");
    all.putAll(settings);
    String binary = System.getenv("REDLOCKD_BIN");
    if (binary == null || binary.isEmpty()) {
      binary = repo().resolve("target/debug/redlockd").toString();
    }
    List<String> command = new ArrayList<>(List.of(binary));
    if (toml != null) {
      Path file = dir.resolve("redlockd.toml");
      Files.writeString(file, toml);
      command.add("--config");
      command.add(file.toString());
    }
    ProcessBuilder builder = new ProcessBuilder(command);
    Map<String, String> env = builder.environment();
    env.keySet().removeIf(key -> key.startsWith("REDLOCKD__"));
    all.forEach(
        (key, value) ->
            env.put("REDLOCKD__" + key.replace(".", "__").toUpperCase(Locale.ROOT), value));
    env.putIfAbsent("RUST_LOG", "warn");
    Path log = dir.resolve("redlockd.log");
    builder.redirectErrorStream(true).redirectOutput(log.toFile());
    Process process = builder.start();
    Daemon daemon = new Daemon(masters, "127.0.0.1:" + port, dir, process);
    try {
      daemon.awaitServing(probe);
    } catch (Exception | AssertionError e) {
      daemon.close();
      throw e;
    }
    return daemon;
  }

  /**
   * Polls the daemon's health service until the lock service is SERVING (a quorum of masters up
   * and trusted), connecting with {@code credentials} (TLS).
   */
  private void awaitServing(ChannelCredentials credentials) throws InterruptedException {
    long limit = System.nanoTime() + START_LIMIT.toNanos();
    String last = "no answer";
    ManagedChannel channel = Grpc.newChannelBuilder(address, credentials).build();
    try {
      HealthGrpc.HealthBlockingStub health = HealthGrpc.newBlockingStub(channel);
      HealthCheckRequest request =
          HealthCheckRequest.newBuilder().setService("redlock.v1.LockService").build();
      while (System.nanoTime() < limit) {
        if (!process.isAlive()) {
          throw new IllegalStateException(
              "redlockd exited (" + process.exitValue() + "):\n" + logTail());
        }
        try {
          HealthCheckResponse.ServingStatus status =
              health.withDeadlineAfter(1, TimeUnit.SECONDS).check(request).getStatus();
          if (status == HealthCheckResponse.ServingStatus.SERVING) {
            return;
          }
          last = status.toString();
        } catch (StatusRuntimeException notYet) {
          last = notYet.getStatus().toString();
        }
        Thread.sleep(20);
      }
    } finally {
      channel.shutdownNow();
    }
    throw new IllegalStateException(
        "redlockd at " + address + " not SERVING within " + START_LIMIT + " (last: " + last
            + "):\n" + logTail());
  }

  /** The last lines of the daemon's log, for failure messages. */
  String logTail() {
    return tail(dir.resolve("redlockd.log"));
  }

  /** Sends a signal ({@code TERM}, {@code STOP}, {@code CONT}) to the daemon with kill(1). */
  void signal(String name) throws IOException, InterruptedException {
    Process kill = new ProcessBuilder("kill", "-" + name, Long.toString(process.pid())).start();
    if (kill.waitFor() != 0) {
      throw new IllegalStateException("kill -" + name + " failed");
    }
  }

  /** Completes when the daemon has exited. */
  java.util.concurrent.CompletableFuture<Process> exited() {
    return process.onExit();
  }

  @Override
  public void close() {
    try {
      signal("CONT");
    } catch (Exception ignored) {
      // Already gone.
    }
    kill(process);
    masters.forEach(Master::stop);
    try (Stream<Path> files = Files.walk(dir)) {
      files.sorted(Comparator.reverseOrder()).forEach(deleteQuietly());
    } catch (IOException ignored) {
      // Best effort: a temporary directory.
    }
  }

  private static Consumer<Path> deleteQuietly() {
    return path -> {
      try {
        Files.deleteIfExists(path);
      } catch (IOException ignored) {
        // Best effort.
      }
    };
  }

  private static void kill(Process process) {
    process.destroyForcibly();
    try {
      process.waitFor();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  static String tail(Path log) {
    try {
      List<String> lines = Files.readAllLines(log);
      return String.join("\n", lines.subList(Math.max(0, lines.size() - 20), lines.size()));
    } catch (IOException e) {
      return "(no log: " + e.getMessage() + ")";
    }
  }

  /** One valkey-server master with no persistence. */
  static final class Master {
    final int port;
    final String url;
    private final Path log;
    private final Process process;

    Master(String binary, Path dir, int port) throws IOException {
      this.port = port;
      this.url = "redis://127.0.0.1:" + port;
      this.log = dir.resolve("master-" + port + ".log");
      this.process =
          new ProcessBuilder(
                  binary, "--port", Integer.toString(port), "--bind", "127.0.0.1", "--save", "",
                  "--appendonly", "no", "--protected-mode", "yes", "--daemonize", "no",
                  "--loglevel", "warning", "--dir", dir.toString())
              .redirectErrorStream(true)
              .redirectOutput(log.toFile())
              .start();
    }

    void awaitListening() throws InterruptedException {
      long limit = System.nanoTime() + START_LIMIT.toNanos();
      while (System.nanoTime() < limit) {
        if (!process.isAlive()) {
          throw new IllegalStateException(
              "exited (" + process.exitValue() + ") before listening on " + port + ":\n"
                  + tail(log));
        }
        try (Socket socket = new Socket()) {
          socket.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 1000);
          return;
        } catch (IOException notYet) {
          Thread.sleep(20);
        }
      }
      throw new IllegalStateException("nothing listened on " + port + ":\n" + tail(log));
    }

    /** Sends one command (RESP over a fresh connection); returns the first reply line. */
    String command(String... args) throws IOException {
      StringBuilder request = new StringBuilder("*" + args.length + "\r\n");
      for (String arg : args) {
        request.append('$').append(arg.getBytes(StandardCharsets.UTF_8).length).append("\r\n");
        request.append(arg).append("\r\n");
      }
      try (Socket socket = new Socket(InetAddress.getLoopbackAddress(), port)) {
        socket.setSoTimeout(5000);
        OutputStream out = socket.getOutputStream();
        out.write(request.toString().getBytes(StandardCharsets.UTF_8));
        out.flush();
        InputStream in = socket.getInputStream();
        StringBuilder line = new StringBuilder();
        int c;
        while ((c = in.read()) != -1 && c != '\r') {
          line.append((char) c);
        }
        return line.toString();
      }
    }

    /** Kills the master (SIGKILL): its keys are gone with it. */
    void stop() {
      kill(process);
    }
  }
}
