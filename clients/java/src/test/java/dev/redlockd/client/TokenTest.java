package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * Bearer tokens against a real daemon: the token goes as {@code authorization: Bearer} on every
 * call and session; a resource outside its namespaces and a missing or wrong token are refused.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class TokenTest {
  private static final String ORDERS_TOKEN = "orders-7f3a9c2e4b6d8f0a1c3e5b7d9f2a4c6e";

  private Daemon daemon;

  @BeforeAll
  void start() throws Exception {
    byte[] sha = MessageDigest.getInstance("SHA-256").digest(ORDERS_TOKEN.getBytes(StandardCharsets.UTF_8));
    String toml =
        "[[auth.clients]]\nname = \"orders\"\ntoken_sha256 = \""
            + HexFormat.of().formatHex(sha)
            + "\"\nnamespaces = [\"orders/\"]\n";
    daemon = Daemon.start(Map.of(), toml, List.of());
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
      Pki.roundTrip(client, "orders/42");
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
