package dev.durable.admin;

import dev.durable.Instance;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * One instance with what an operator asks about it: its children (live and settled, in id order, at
 * most {@link DurableAdmin#DETAIL_CHILDREN}; {@code moreChildren} when there are more), the signals of
 * its inbox while it is live ({@code inbox}, consumed ones included) or, once settled, the names of the
 * signals it consumed in delivery order ({@code consumedSignals}), the error it last failed with, and its
 * attempts, oldest first ({@code attempts}, at most {@link DurableAdmin#DETAIL_ATTEMPTS} of the newest):
 * each attempt that ended unsuccessfully while the instance lived on (retried after an error, lease
 * lost), then, read from the instance's own row, the attempt that runs now or the one it settled with.
 * A step that succeeded and moved a workflow on leaves no attempt of its own, but its input: {@code stepInputs}
 * holds the state each step last started with (oldest first, the step the instance is at last), from which
 * it can be replayed or forked. {@code forkedFrom} is the instance it was forked from (which may be gone
 * since), {@code forks} the instances forked from it (at most {@link DurableAdmin#DETAIL_FORKS}, oldest first).
 */
public record InstanceDetail(Instance instance, List<Instance> children, boolean moreChildren,
        List<InboxSignal> inbox, List<String> consumedSignals, @Nullable String lastError, List<Attempt> attempts,
        List<StepInput> stepInputs, @Nullable Long forkedFrom, List<Long> forks) {

    public InstanceDetail {
        stepInputs = List.copyOf(stepInputs);
        forks = List.copyOf(forks);
        children = List.copyOf(children);
        attempts = List.copyOf(attempts);
        inbox = List.copyOf(inbox);
        consumedSignals = List.copyOf(consumedSignals);
    }
}
