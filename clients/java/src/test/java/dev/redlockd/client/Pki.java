package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * Test helper for the security tests: a private CA, a server certificate for 127.0.0.1/localhost
 * and a client certificate made with the openssl CLI, and a round trip through a client.
 */
final class Pki {
  private Pki() {}

  /** Deletes a scratch directory of flat files (best effort). */
  static void removeTree(Path dir) {
    if (dir == null) {
      return;
    }
    try (var files = Files.list(dir)) {
      for (Path file : (Iterable<Path>) files::iterator) {
        Files.deleteIfExists(file);
      }
      Files.deleteIfExists(dir);
    } catch (IOException ignored) {
      // A temporary directory: best effort.
    }
  }

  /** A private CA, a server certificate for 127.0.0.1/localhost, a client certificate. */
  static void make(Path dir) throws IOException, InterruptedException {
    List<String> key = List.of("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes");
    List<String> ca = new ArrayList<>(List.of("req", "-x509"));
    ca.addAll(key);
    ca.addAll(
        List.of(
            "-keyout", "ca.key", "-out", "ca.crt", "-days", "2", "-subj", "/CN=redlockd test CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext",
            "keyUsage=critical,keyCertSign,cRLSign"));
    openssl(dir, ca);
    issue(dir, key, "server", "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n");
    issue(dir, key, "client", "subjectAltName=DNS:orders.client.test\nextendedKeyUsage=clientAuth\n");
  }

  private static void issue(Path dir, List<String> key, String name, String extensions)
      throws IOException, InterruptedException {
    Files.writeString(dir.resolve(name + ".ext"), extensions);
    List<String> request = new ArrayList<>(List.of("req"));
    request.addAll(key);
    request.addAll(List.of("-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name));
    openssl(dir, request);
    openssl(
        dir,
        List.of(
            "x509", "-req", "-in", name + ".csr", "-CA", "ca.crt", "-CAkey", "ca.key",
            "-CAcreateserial", "-out", name + ".crt", "-days", "2", "-extfile", name + ".ext"));
  }

  private static void openssl(Path dir, List<String> args) throws IOException, InterruptedException {
    List<String> command = new ArrayList<>(List.of("openssl"));
    command.addAll(args);
    Process process =
        new ProcessBuilder(command)
            .directory(dir.toFile())
            .redirectErrorStream(true)
            .redirectOutput(dir.resolve("openssl.log").toFile())
            .start();
    if (process.waitFor() != 0) {
      throw new IllegalStateException(
          "openssl " + String.join(" ", args) + " failed:\n" + Daemon.tail(dir.resolve("openssl.log")));
    }
  }

  /** Acquires and releases {@code resource}, then holds it: proof that calls get through. */
  static void roundTrip(LockClient client, String resource) {
    Lock lock = client.acquire(resource, Duration.ofSeconds(5));
    assertTrue(client.release(lock));
    try (Lease lease = client.hold(resource, Duration.ofSeconds(5))) {
      assertTrue(Long.compareUnsigned(lease.fence(), lock.fence()) > 0);
    }
  }
}
