package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/** Mutual TLS against a real daemon: a client certificate signed by the private CA. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class MutualTlsTest {
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
                "server.tls.key", pki.resolve("server.key").toString(),
                "server.tls.client_ca", pki.resolve("ca.crt").toString()),
            null,
            List.of(
                "--probe-ca", pki.resolve("ca.crt").toString(),
                "--probe-cert", pki.resolve("client.crt").toString(),
                "--probe-key", pki.resolve("client.key").toString()));
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
    Pki.removeTree(pki);
  }

  @Test
  void withAClientCertificateSignedByTheCaCallsAndSessionsGoThrough() {
    try (LockClient client = withClientCertificate(LockClient.builder(daemon.address))) {
      Pki.roundTrip(client, "mtls/ok");
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
