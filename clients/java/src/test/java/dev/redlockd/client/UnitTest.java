package dev.redlockd.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.grpc.Status;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import redlock.v1.Election.ObserveResponse;

/**
 * Pure logic: status mapping, the stop margin, durations, the token kept out of strings, an
 * observation's (term, value version) order.
 */
class UnitTest {
  private static RedlockdException map(Status.Code code, String details) {
    return Errors.fromStatus(Status.fromCode(code).withDescription(details), "Acquire", null);
  }

  @Test
  void eachStatusCodeMapsToItsOwnExceptionAndKind() {
    assertInstanceOf(LockHeldException.class, map(Status.Code.ABORTED, "held"));
    assertInstanceOf(LockNotHeldException.class, map(Status.Code.FAILED_PRECONDITION, "x"));
    assertInstanceOf(DeadlineExceededException.class, map(Status.Code.DEADLINE_EXCEEDED, "x"));
    assertInstanceOf(ResourceExhaustedException.class, map(Status.Code.RESOURCE_EXHAUSTED, "x"));
    assertInstanceOf(UnauthenticatedException.class, map(Status.Code.UNAUTHENTICATED, "x"));
    assertInstanceOf(PermissionDeniedException.class, map(Status.Code.PERMISSION_DENIED, "x"));
    RedlockdException unavailable = map(Status.Code.UNAVAILABLE, "no quorum");
    assertInstanceOf(UnavailableException.class, unavailable);
    assertTrue(unavailable.isRetryable());
    assertEquals("unavailable", unavailable.kind());
    assertEquals("no quorum", unavailable.details());
    assertEquals("Acquire: UNAVAILABLE: no quorum", unavailable.getMessage());
    RedlockdException other = map(Status.Code.INTERNAL, "boom");
    assertEquals(RedlockdException.class, other.getClass());
    assertEquals("error", other.kind());
    assertFalse(other.isRetryable());
  }

  @Test
  void invalidArgumentNamesTheFieldTheDaemonWroteFirst() {
    RedlockdException error = map(Status.Code.INVALID_ARGUMENT, "ttl: must be at most 1h");
    assertEquals("ttl", ((InvalidArgumentException) error).field());
    assertNull(((InvalidArgumentException) map(Status.Code.INVALID_ARGUMENT, "bad")).field());
  }

  @Test
  void theStopMarginIsATenthOfTheTtlFrom50msTo2s() {
    assertEquals(Duration.ofMillis(50), Lease.stopMargin(Duration.ofMillis(100)));
    assertEquals(Duration.ofMillis(300), Lease.stopMargin(Duration.ofSeconds(3)));
    assertEquals(Duration.ofSeconds(2), Lease.stopMargin(Duration.ofMinutes(5)));
  }

  @Test
  void durationsConvertBothWaysAndNegativesAreRefused() {
    com.google.protobuf.Duration wire = Wire.toProto(Duration.ofMillis(1500), "ttl");
    assertEquals(1, wire.getSeconds());
    assertEquals(500_000_000, wire.getNanos());
    assertEquals(Duration.ofMillis(1500), Wire.fromProto(wire));
    InvalidArgumentException error =
        assertThrows(InvalidArgumentException.class, () -> Wire.toProto(Duration.ofMillis(-1), "wait"));
    assertEquals("wait", error.field());
  }

  @Test
  void aLocksStringLeavesTheTokenOut() {
    Lock lock = new Lock("orders/1", "secret-token-value");
    assertFalse(lock.toString().contains("secret-token-value"), lock.toString());
    assertTrue(lock.toString().contains("orders/1"));
  }

  @Test
  void theBuilderRefusesBadSettingsNamingThem() {
    assertEquals(
        "target",
        assertThrows(InvalidArgumentException.class, () -> LockClient.builder("")).field());
    assertEquals(
        "token",
        assertThrows(InvalidArgumentException.class, () -> LockClient.builder("h:1").token(""))
            .field());
    assertEquals(
        "deadline",
        assertThrows(
                InvalidArgumentException.class,
                () -> LockClient.builder("h:1").deadline(Duration.ZERO))
            .field());
  }

  private static ObserveResponse leaderOf(long term) {
    return ObserveResponse.newBuilder()
        .setHasLeader(true)
        .setLeader(redlock.v1.Election.Leader.newBuilder().setName("e").setValue("v").setTerm(term))
        .build();
  }

  @Test
  void anObservationOnlyEverStepsForward() {
    List<Optional<Long>> told = new ArrayList<>();
    Observation observation =
        new Observation("e", leader -> told.add(leader.map(Leader::term)), () -> {});
    var events = observation.observer();
    ObserveResponse none = ObserveResponse.getDefaultInstance();
    for (ObserveResponse event :
        List.of(none, leaderOf(5), leaderOf(5), leaderOf(3), none, none, leaderOf(5), leaderOf(7))) {
      events.onNext(event);
    }
    assertEquals(
        List.of(Optional.empty(), Optional.of(5L), Optional.empty(), Optional.of(7L)), told);
    events.onCompleted();
    assertTrue(observation.isEnded());
  }

  private static ObserveResponse leaderOf(long term, long valueVersion) {
    return ObserveResponse.newBuilder()
        .setHasLeader(true)
        .setLeader(
            redlock.v1.Election.Leader.newBuilder()
                .setName("e")
                .setValue("v" + valueVersion)
                .setTerm(term)
                .setValueVersion(valueVersion))
        .build();
  }

  /**
   * A proclaimed value of the same term steps forward only with a higher value version; a term
   * below, even with a higher version, never does.
   */
  @Test
  void anObservationOrdersTheSameTermsValuesByVersion() {
    List<String> told = new ArrayList<>();
    Observation observation =
        new Observation(
            "e",
            leader -> told.add(leader.map(l -> l.term() + "/" + l.valueVersion()).orElse("none")),
            () -> {});
    var events = observation.observer();
    for (ObserveResponse event :
        List.of(
            leaderOf(5, 0),
            leaderOf(5, 2),
            leaderOf(5, 1),
            leaderOf(5, 2),
            leaderOf(4, 9),
            leaderOf(5, 3),
            leaderOf(6, 0),
            leaderOf(5, 7),
            ObserveResponse.getDefaultInstance(),
            leaderOf(6, 0),
            leaderOf(7, 0))) {
      events.onNext(event);
    }
    assertEquals(List.of("5/0", "5/2", "5/3", "6/0", "none", "7/0"), told);
  }

  @Test
  void aLeaderFromTheWireKeepsItsFieldsAndAnAbsentSinceIsNull() {
    Leader leader =
        Leader.fromWire(
            redlock.v1.Election.Leader.newBuilder().setName("jobs").setValue("pod-1").setTerm(9).build());
    assertTrue(leader.toString().contains("pod-1"), leader.toString());
    assertNull(leader.since(), "no since: null");
    assertEquals(Duration.ZERO, leader.remaining());
    assertEquals(0L, leader.valueVersion(), "no value_version: the campaign's value");
  }
}
