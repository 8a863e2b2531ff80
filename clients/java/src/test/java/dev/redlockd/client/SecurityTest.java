package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.ChannelCredentials;
import io.grpc.InsecureChannelCredentials;
import io.grpc.Status;
import io.grpc.TlsChannelCredentials;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Bearer tokens and TLS against a real daemon: the token goes as {@code authorization: Bearer} on
 * every call and session; TLS with a private CA made here with the openssl CLI; mutual TLS.
 */
class SecurityTest {
  private static final String ORDERS_TOKEN = "orders-7f3a9c2e4b6d8f0a1c3e5b7d9f2a4c6e";

  /** Acquires and releases {@code resource}, then holds it: proof that calls get through. */
  private static void roundTrip(LockClient client, String resource) {
    Lock lock = client.acquire(resource, Duration.ofSeconds(5));
    assertTrue(client.release(lock));
    try (Lease lease = client.hold(resource, Duration.ofSeconds(5))) {
      assertTrue(Long.compareUnsigned(lease.fence(), lock.fence()) > 0);
    }
  }

  @Nested
  @TestInstance(TestInstance.Lifecycle.PER_CLASS)
  class BearerTokens {
    private Daemon daemon;

    @BeforeAll
    void start() throws Exception {
      byte[] sha = MessageDigest.getInstance("SHA-256").digest(ORDERS_TOKEN.getBytes(StandardCharsets.UTF_8));
      String toml =
          "[[auth.clients]]\nname = \"orders\"\ntoken_sha256 = \""
              + HexFormat.of().formatHex(sha)
              + "\"\nnamespaces = [\"orders/\"]\n";
      daemon = Daemon.start(Map.of(), toml, InsecureChannelCredentials.create());
    }

    @AfterAll
    void stop() {
      if (daemon != null) {
        daemon.close();
      }
    }

    @Test
    void withTheTokenCallsAndSessionsInItsNamespacesGoThrough() {
      try (LockClient client = LockClient.builder(daemon.address).token(ORDERS_TOKEN).build()) {
        roundTrip(client, "orders/42");
      }
    }

    @Test
    void outsideItsNamespacesIsPermissionDeniedForCallsAndSessions() {
      try (LockClient client = LockClient.builder(daemon.address).token(ORDERS_TOKEN).build()) {
        PermissionDeniedException call =
            assertThrows(
                PermissionDeniedException.class, () -> client.acquire("jobs/1", Duration.ofSeconds(1)));
        assertEquals("permission_denied", call.kind());
        assertThrows(
            PermissionDeniedException.class, () -> client.hold("jobs/1", Duration.ofSeconds(1)));
      }
    }

    @Test
    void noTokenOrAWrongOneIsUnauthenticated() {
      List<LockClient> clients = new ArrayList<>();
      clients.add(LockClient.builder(daemon.address).build());
      clients.add(LockClient.builder(daemon.address).token("orders-wrong").build());
      for (LockClient client : clients) {
        try (client) {
          UnauthenticatedException error =
              assertThrows(
                  UnauthenticatedException.class,
                  () -> client.acquire("orders/1", Duration.ofSeconds(1)));
          assertEquals("unauthenticated", error.kind());
          assertFalse(error.getMessage().contains(ORDERS_TOKEN));
          assertThrows(
              UnauthenticatedException.class, () -> client.hold("orders/1", Duration.ofSeconds(1)));
        }
      }
    }
  }

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
  static void makePki(Path dir) throws IOException, InterruptedException {
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

  @Nested
  @TestInstance(TestInstance.Lifecycle.PER_CLASS)
  class TlsWithAPrivateCa {
    private Path pki;
    private Daemon daemon;

    @BeforeAll
    void start() throws Exception {
      pki = Files.createTempDirectory("redlockd-java-pki-");
      makePki(pki);
      ChannelCredentials probe =
          TlsChannelCredentials.newBuilder().trustManager(pki.resolve("ca.crt").toFile()).build();
      daemon =
          Daemon.start(
              Map.of(
                  "server.tls.cert", pki.resolve("server.crt").toString(),
                  "server.tls.key", pki.resolve("server.key").toString()),
              null,
              probe);
    }

    @AfterAll
    void stop() {
      if (daemon != null) {
        daemon.close();
      }
      removeTree(pki);
    }

    @Test
    void aClientTrustingTheCaGetsThroughWithOrWithoutHttpsInTheTarget() {
      for (String target : List.of(daemon.address, "https://" + daemon.address)) {
        try (LockClient client =
            LockClient.builder(target).trustCertificates(pki.resolve("ca.crt")).build()) {
          roundTrip(client, "tls/ok");
        }
      }
    }

    @Test
    void tlsWithoutTheCaIsUnavailableAndPlaintextFails() {
      try (LockClient client =
          LockClient.builder("https://" + daemon.address).deadline(Duration.ofSeconds(5)).build()) {
        assertThrows(
            UnavailableException.class, () -> client.acquire("tls/refused", Duration.ofSeconds(1)));
      }
      // grpc-java reports a plaintext HTTP/2 preface answered by a TLS record as INTERNAL.
      try (LockClient client = LockClient.builder(daemon.address).deadline(Duration.ofSeconds(5)).build()) {
        RedlockdException error =
            assertThrows(
                RedlockdException.class, () -> client.acquire("tls/refused", Duration.ofSeconds(1)));
        assertTrue(
            error.code() == Status.Code.INTERNAL || error.code() == Status.Code.UNAVAILABLE,
            error.toString());
      }
    }

    @Test
    void anUnreadableCertificateFileIsRefusedBeforeConnecting() {
      InvalidArgumentException error =
          assertThrows(
              InvalidArgumentException.class,
              () ->
                  LockClient.builder(daemon.address)
                      .trustCertificates(pki.resolve("missing.crt"))
                      .build());
      assertEquals("tls", error.field());
    }
  }

  @Nested
  @TestInstance(TestInstance.Lifecycle.PER_CLASS)
  class MutualTls {
    private Path pki;
    private Daemon daemon;

    @BeforeAll
    void start() throws Exception {
      pki = Files.createTempDirectory("redlockd-java-pki-");
      makePki(pki);
      daemon =
          Daemon.start(
              Map.of(
                  "server.tls.cert", pki.resolve("server.crt").toString(),
                  "server.tls.key", pki.resolve("server.key").toString(),
                  "server.tls.client_ca", pki.resolve("ca.crt").toString()),
              null,
              TlsChannelCredentials.newBuilder()
                  .trustManager(pki.resolve("ca.crt").toFile())
                  .keyManager(pki.resolve("client.crt").toFile(), pki.resolve("client.key").toFile())
                  .build());
    }

    private LockClient withClientCertificate(LockClient.Builder builder) {
      return builder
          .trustCertificates(pki.resolve("ca.crt"))
          .clientCertificate(pki.resolve("client.crt"), pki.resolve("client.key"))
          .build();
    }

    @AfterAll
    void stop() {
      if (daemon != null) {
        daemon.close();
      }
      removeTree(pki);
    }

    @Test
    void withAClientCertificateSignedByTheCaCallsAndSessionsGoThrough() {
      try (LockClient client = withClientCertificate(LockClient.builder(daemon.address))) {
        roundTrip(client, "mtls/ok");
      }
    }

    @Test
    void withoutAClientCertificateTheCallFails() {
      try (LockClient client =
          LockClient.builder(daemon.address)
              .trustCertificates(pki.resolve("ca.crt"))
              .deadline(Duration.ofSeconds(5))
              .build()) {
        RedlockdException error =
            assertThrows(
                RedlockdException.class, () -> client.acquire("mtls/refused", Duration.ofSeconds(1)));
        assertTrue(
            error instanceof UnavailableException || error instanceof UnauthenticatedException,
            error.toString());
      }
    }
  }
}
