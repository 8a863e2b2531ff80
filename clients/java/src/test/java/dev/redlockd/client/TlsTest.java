package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/** TLS with a private CA, made here with the openssl CLI, against a real daemon. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TlsTest {
  private Path pki;
  private Daemon daemon;

  @BeforeAll
  void start() throws Exception {
    pki = Files.createTempDirectory("redlockd-java-pki-");
    Pki.make(pki);
    daemon =
        Daemon.start(
            Map.of(
                "server.tls.cert", pki.resolve("server.crt").toString(),
                "server.tls.key", pki.resolve("server.key").toString()),
            null,
            List.of("--probe-ca", pki.resolve("ca.crt").toString()));
  }

  @AfterAll
  void stop() {
    if (daemon != null) {
      daemon.close();
    }
    Pki.removeTree(pki);
  }

  @Test
  void aClientTrustingTheCaGetsThroughWithOrWithoutHttpsInTheTarget() {
    for (String target : List.of(daemon.address, "https://" + daemon.address)) {
      try (LockClient client =
          LockClient.builder(target).trustCertificates(pki.resolve("ca.crt")).build()) {
        Pki.roundTrip(client, "tls/ok");
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
