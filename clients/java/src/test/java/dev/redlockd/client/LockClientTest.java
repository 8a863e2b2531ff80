package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

/** The unary calls and plain Hold sessions against a real daemon over five real masters. */
class LockClientTest {
  private static Daemon daemon;
  private static LockClient client;

  @BeforeAll
  static void start() throws Exception {
    daemon = Daemon.start();
    client = LockClient.builder(daemon.address).owner("java-test").build();
  }

  @AfterAll
  static void stop() {
    if (client != null) {
      client.close();
    }
    if (daemon != null) {
      daemon.close();
    }
  }

  private static Duration seconds(long n) {
    return Duration.ofSeconds(n);
  }

  @Test
  void grantCarriesAFenceLargerForEachHolderAndAValidityCountedFromTheSend() {
    long sent = System.nanoTime();
    Lock first = client.acquire("unary/grant", seconds(10));
    assertEquals("unary/grant", first.resource());
    assertTrue(first.fence() > 0, "fence " + first.fence());
    assertTrue(first.token().length() >= 16);
    assertTrue(
        first.validity().compareTo(Duration.ZERO) > 0 && first.validity().compareTo(seconds(10)) <= 0,
        first.validity().toString());
    assertTrue(first.validUntilNanos() <= sent + seconds(10).toNanos());
    assertTrue(first.remaining().compareTo(Duration.ZERO) > 0);
    assertFalse(first.toString().contains(first.token()), "toString leaks the token");
    assertTrue(client.release(first));
    Lock second = client.acquire("unary/grant", seconds(10));
    assertTrue(
        Long.compareUnsigned(second.fence(), first.fence()) > 0,
        second.fence() + " > " + first.fence());
    client.release(second);
  }

  @Test
  void aRetryWithTheSameRequestIdGetsTheSameLock() {
    String id = LockClient.newRequestId();
    Lock first = client.acquire("unary/idem", seconds(10), Duration.ZERO, id);
    Lock again = client.acquire("unary/idem", seconds(10), Duration.ZERO, id);
    assertEquals(first.token(), again.token());
    assertEquals(first.fence(), again.fence());
    assertThrows(LockHeldException.class, () -> client.acquire("unary/idem", seconds(10)));
    assertTrue(client.release(again));
  }

  @Test
  void aResourceHeldElsewhereIsLockHeldException() {
    Lock held = client.acquire("unary/contended", seconds(10));
    LockHeldException once =
        assertThrows(LockHeldException.class, () -> client.acquire("unary/contended", seconds(10)));
    assertEquals(Status.Code.ABORTED, once.code());
    assertEquals("held", once.kind());
    assertFalse(once.isRetryable());
    assertThrows(
        LockHeldException.class,
        () -> client.acquire("unary/contended", seconds(10), Duration.ofMillis(200)));
    LockHeldException session =
        assertThrows(LockHeldException.class, () -> client.hold("unary/contended", seconds(10)));
    assertEquals("held", session.kind());
    assertTrue(client.release(held));
  }

  @Test
  void aWaitingAcquireIsWokenByTheHoldersReleaseLongBeforeItsTtl() throws Exception {
    Lock holder = client.acquire("unary/wait", seconds(60));
    long started = System.nanoTime();
    CompletableFuture<Lock> waiter =
        CompletableFuture.supplyAsync(() -> client.acquire("unary/wait", seconds(10), seconds(30)));
    // The waiter waits on the daemon: no answer while the holder holds (and time to arrive).
    assertThrows(TimeoutException.class, () -> waiter.get(300, TimeUnit.MILLISECONDS));
    assertTrue(client.release(holder));
    Lock granted = waiter.get(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS);
    assertTrue(Long.compareUnsigned(granted.fence(), holder.fence()) > 0);
    // Granted after the release and long before the holder's ttl or the wait ran out: woken by it.
    assertTrue(System.nanoTime() - started < seconds(30).toNanos());
    client.release(granted);
  }

  @Test
  void aWaitingHoldIsWokenByTheHoldersRelease() throws Exception {
    Lock holder = client.acquire("session/wait", seconds(60));
    CompletableFuture<Lease> waiter =
        CompletableFuture.supplyAsync(() -> client.hold("session/wait", seconds(5), seconds(30)));
    assertTrue(client.release(holder));
    try (Lease lease = waiter.get(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS)) {
      assertTrue(Long.compareUnsigned(lease.fence(), holder.fence()) > 0);
    }
  }

  @Test
  void extendKeepsTheFenceWhileHeldAndAfterExpiryIsLockNotHeldException() throws Exception {
    Lock lock = client.acquire("unary/extend", seconds(1));
    Lock extended = client.extend(lock, seconds(10));
    assertEquals(lock.fence(), extended.fence());
    assertEquals(lock.token(), extended.token());
    assertTrue(extended.validity().compareTo(seconds(1)) > 0, extended.validity().toString());
    Lock shorter = client.extend(lock, Duration.ofMillis(200));
    Poll.until(() -> !client.validate(shorter).held(), "the lock expires");
    // Validate says not held once no validity is left (the drift allowance
    // and its own round counted), a few ms before the keys expire on the
    // masters; an Extend in that gap still finds them on a majority and
    // rightly succeeds. A new holder proves the keys are gone; once it has
    // released, Extend finds nothing.
    Lock next = client.acquire("unary/extend", seconds(10), seconds(5));
    assertTrue(client.release(next));
    LockNotHeldException error =
        assertThrows(LockNotHeldException.class, () -> client.extend(shorter, seconds(10)));
    assertEquals("not_held", error.kind());
    assertEquals(Status.Code.FAILED_PRECONDITION, error.code());
  }

  @Test
  void releaseIsIdempotentTheSecondSaysWasHeldFalse() {
    Lock lock = client.acquire("unary/release", seconds(10));
    assertTrue(client.release(lock));
    assertFalse(client.release(lock));
  }

  @Test
  void validateSaysHeldWithAValidityAndNotHeldAfterRelease() {
    Lock lock = client.acquire("unary/validate", seconds(10));
    long asked = System.nanoTime();
    Validation valid = client.validate(lock);
    assertTrue(valid.held());
    assertTrue(valid.validity().compareTo(Duration.ZERO) > 0);
    assertTrue(valid.validity().compareTo(seconds(10)) <= 0);
    assertTrue(valid.validUntilNanos() <= System.nanoTime() + valid.validity().toNanos());
    assertTrue(valid.validUntilNanos() >= asked);
    Validation other = client.validate(new Lock(lock.resource(), "0".repeat(32)));
    assertFalse(other.held());
    assertEquals(Duration.ZERO, other.validity());
    assertTrue(client.release(lock));
    assertFalse(client.validate(lock).held());
  }

  private static void refused(String field, Executable call) {
    InvalidArgumentException error = assertThrows(InvalidArgumentException.class, call);
    assertEquals(field, error.field(), error.getMessage());
    assertTrue(error.details().startsWith(field + ": "), error.details());
    assertEquals("invalid_argument", error.kind());
    assertEquals(Status.Code.INVALID_ARGUMENT, error.code());
  }

  @Test
  void badInputIsInvalidArgumentExceptionNamingTheFieldFromTheClientOrTheDaemon() {
    // Refused here, before any call.
    refused("resource", () -> client.acquire("", seconds(1)));
    refused("resource", () -> client.hold(null, seconds(1)));
    refused("ttl", () -> client.acquire("unary/bad", null));
    refused("wait", () -> client.acquire("unary/bad", seconds(1), Duration.ofMillis(-1)));
    refused("token", () -> client.extend(new Lock("unary/bad", ""), seconds(1)));
    // Refused by the daemon (its limits: min_ttl 10ms, max_ttl 1h, max_resource_len 512).
    refused("ttl", () -> client.acquire("unary/bad", Duration.ofHours(2)));
    refused("ttl", () -> client.acquire("unary/bad", Duration.ofMillis(1)));
    refused("resource", () -> client.acquire("r".repeat(600), seconds(1)));
    refused("ttl", () -> client.hold("unary/bad", Duration.ofHours(2)));
  }

  @Test
  void aDeadlineShorterThanTheWaitIsDeadlineExceededAndLeavesNothingLocked() {
    Lock holder = client.acquire("unary/deadline", seconds(30));
    LockClient hasty = client.withDeadline(Duration.ofMillis(300));
    DeadlineExceededException unary =
        assertThrows(
            DeadlineExceededException.class,
            () -> hasty.acquire("unary/deadline", seconds(10), seconds(5)));
    assertEquals("deadline_exceeded", unary.kind());
    assertThrows(
        DeadlineExceededException.class,
        () -> hasty.hold("unary/deadline", seconds(10), seconds(5)));
    assertTrue(client.release(holder));
    // Neither the call nor the session left the resource locked.
    Lock next = client.acquire("unary/deadline", seconds(10));
    assertTrue(client.release(next));
  }

  @Test
  void noDaemonAtTheAddressIsUnavailableExceptionMarkedRetryable() {
    try (LockClient nowhere =
        LockClient.builder("127.0.0.1:" + Daemon.freePort()).deadline(seconds(5)).build()) {
      UnavailableException error =
          assertThrows(UnavailableException.class, () -> nowhere.acquire("unary/nowhere", seconds(1)));
      assertTrue(error.isRetryable());
      assertEquals("unavailable", error.kind());
    }
  }

  @Test
  void aLeaseIsExtendedByTheDaemonAndReleasedOnClose() throws Exception {
    Lease kept;
    try (Lease lease = client.hold("session/basic", Duration.ofMillis(1500), Duration.ZERO)) {
      kept = lease;
      assertTrue(lease.fence() > 0);
      assertEquals("session/basic", lease.resource());
      assertNotNull(lease.lock());
      // The daemon extends well within the ttl; the lease follows.
      Poll.until(() -> lease.extensions() >= 2, "two extensions arrive");
      lease.check();
      assertFalse(lease.isLost());
      assertFalse(lease.lost().isDone());
      // Still held on the daemon's side, with a renewed validity.
      assertTrue(client.validate(lease.lock()).held());
      LockHeldException busy =
          assertThrows(LockHeldException.class, () -> client.acquire("session/basic", seconds(5)));
      assertEquals("held", busy.kind());
    }
    // close() released it: the lease says so, and the resource is free at once.
    assertTrue(kept.isLost());
    LockLostException reason = kept.lost().get(Poll.LIMIT.toMillis(), TimeUnit.MILLISECONDS);
    assertEquals("released at the client's request", reason.reason());
    assertThrows(LockLostException.class, kept::check);
    Lock next = client.acquire("session/basic", seconds(5));
    assertTrue(Long.compareUnsigned(next.fence(), kept.fence()) > 0);
    assertTrue(client.release(next));
  }

  @Test
  void releasingALeaseSaysWasHeldAndRepeatsTheAnswer() {
    Lease lease = client.hold("session/release", seconds(5));
    assertTrue(lease.release());
    assertTrue(lease.release());
    lease.close();
    assertFalse(client.validate(lease.lock()).held());
  }

  @Test
  void closingTheClientCancelsItsSessionsSoTheDaemonReleasesTheirLocks() throws Exception {
    LockClient other = LockClient.builder(daemon.address).build();
    Lease lease = other.hold("session/closed", seconds(30));
    other.close();
    LockLostException reason = Poll.lost(lease);
    assertEquals("lost", reason.kind());
    assertTrue(reason.reason().startsWith("the session broke: CANCELLED"), reason.reason());
    // Released by the daemon long before the 30 s ttl.
    Lock next = client.acquire("session/closed", seconds(5), Poll.LIMIT);
    assertTrue(client.release(next));
  }
}
