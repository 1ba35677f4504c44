package dev.durable.admin;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.durable.InstanceStatus;
import dev.durable.InvalidRequestException;
import java.time.Instant;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The admin API's values check their arguments once, and pages carry their cursor. */
class AdminValuesTest {

    @Test
    void aPageRequestStartsAtTheEndOfItsOrderAndFollowsItsCursor() {
        assertThat(PageRequest.newestFirst(10).startAfter()).isEqualTo(Long.MAX_VALUE);
        assertThat(PageRequest.oldestFirst(10).startAfter()).isZero();
        PageRequest next = PageRequest.newestFirst(10).after(PageRequest.cursorFor(42));
        assertThat(next.startAfter()).isEqualTo(42);
        assertThat(next.order()).isEqualTo(PageRequest.Order.NEWEST_FIRST);
        assertThat(next.size()).isEqualTo(10);
        for (String bad : List.of("", "i", "42", "i-1", "ix", "i99999999999999999999")) {
            assertThatThrownBy(() -> PageRequest.oldestFirst(10).after(bad)).isInstanceOf(InvalidRequestException.class);
        }
        assertThatThrownBy(() -> PageRequest.newestFirst(PageRequest.MAX_SIZE + 1))
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("page size");
    }

    @Test
    void aPageSaysWhetherAnotherFollows() {
        Page<String> last = new Page<>(List.of("a"), null);
        assertThat(last.hasNext()).isFalse();
        assertThat(last.nextCursor()).isEmpty();
        Page<String> more = new Page<>(List.of("a"), "i7");
        assertThat(more.nextCursor()).contains("i7");
    }

    @Test
    void aFilterKeepsWhatItWasGivenAndMutatesIntoACopy() {
        Instant from = Instant.parse("2026-01-01T00:00:00Z");
        InstanceFilter filter = InstanceFilter.builder().queue("a", "b").type("t")
                .status(InstanceStatus.FAILED, InstanceStatus.CANCELLED).correlationKeyPrefix("order/")
                .stateContains("{\"customer\": 1}").errorContains("boom").insertedBetween(from, null)
                .updatedBetween(null, from).eligibleBetween(from, from.plusSeconds(1)).parentId(9).build();
        assertThat(filter.queues()).containsExactly("a", "b");
        assertThat(filter.statuses()).containsExactlyInAnyOrder(InstanceStatus.FAILED, InstanceStatus.CANCELLED);
        assertThat(filter.liveOnly()).isFalse();
        assertThat(filter.parentId()).isEqualTo(9L);
        InstanceFilter live = filter.mutate().status(Set.of(InstanceStatus.RUNNABLE)).build();
        assertThat(live.liveOnly()).isTrue();
        assertThat(live.queues()).containsExactly("a", "b");
        assertThat(filter.statuses()).hasSize(2);
        assertThat(InstanceFilter.all().liveOnly()).isFalse();
        assertThat(InstanceFilter.all().statuses()).isEmpty();
    }

    @Test
    void aFilterRefusesWhatCannotMatch() {
        Instant now = Instant.now();
        assertThatThrownBy(() -> InstanceFilter.builder().eligibleBetween(now.plusSeconds(1), now).build())
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("eligible range is empty");
        assertThatThrownBy(() -> InstanceFilter.builder().correlationKey("k").correlationKeyPrefix("k").build())
                .isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> InstanceFilter.builder().type("a\0b")).isInstanceOf(InvalidRequestException.class);
        assertThatThrownBy(() -> InstanceFilter.builder().stateContains("not json"))
                .isInstanceOf(InvalidRequestException.class).hasMessageContaining("stateContains must be JSON");
    }
}
