package dev.durable.admin;

import dev.durable.Instance;
import java.util.List;
import org.jspecify.annotations.Nullable;

/**
 * One instance with what an operator asks about it: its children (live and settled, in id order, at
 * most {@link DurableAdmin#DETAIL_CHILDREN}; {@code moreChildren} when there are more), the signals of
 * its inbox while it is live ({@code inbox}, consumed ones included) or, once settled, the names of the
 * signals it consumed in delivery order ({@code consumedSignals}), and the error it last failed with.
 */
public record InstanceDetail(Instance instance, List<Instance> children, boolean moreChildren,
        List<InboxSignal> inbox, List<String> consumedSignals, @Nullable String lastError) {

    public InstanceDetail {
        children = List.copyOf(children);
        inbox = List.copyOf(inbox);
        consumedSignals = List.copyOf(consumedSignals);
    }
}
