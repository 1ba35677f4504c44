package dev.durable.observation;

import io.micrometer.common.docs.KeyName;
import io.micrometer.observation.Observation;
import io.micrometer.observation.ObservationConvention;
import io.micrometer.observation.docs.ObservationDocumentation;

/** The observations Durable makes, and their keys. */
public enum DurableObservation implements ObservationDocumentation {

    /** One run of one step (a job is one step), from handler invocation to committed outcome. */
    RUN {
        @Override
        public Class<? extends ObservationConvention<? extends Observation.Context>> getDefaultConvention() {
            return DefaultRunObservationConvention.class;
        }

        @Override
        public KeyName[] getLowCardinalityKeyNames() {
            return LowCardinalityKeys.values();
        }

        @Override
        public KeyName[] getHighCardinalityKeyNames() {
            return HighCardinalityKeys.values();
        }
    };

    /** Bounded tags. */
    public enum LowCardinalityKeys implements KeyName {
        QUEUE {
            @Override
            public String asString() {
                return "durable.queue";
            }
        },
        TYPE {
            @Override
            public String asString() {
                return "durable.type";
            }
        },
        STEP {
            @Override
            public String asString() {
                return "durable.step";
            }
        },
        OUTCOME {
            @Override
            public String asString() {
                return "durable.outcome";
            }
        }
    }

    /** Unbounded values: span attributes only. */
    public enum HighCardinalityKeys implements KeyName {
        INSTANCE_ID {
            @Override
            public String asString() {
                return "durable.instance.id";
            }
        },
        ATTEMPT {
            @Override
            public String asString() {
                return "durable.attempt";
            }
        }
    }
}
