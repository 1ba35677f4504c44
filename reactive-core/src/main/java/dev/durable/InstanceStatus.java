package dev.durable;

/** Where an instance is in its life. The database stores {@link #sqlName()}. */
public enum InstanceStatus {
    RUNNABLE("runnable"),
    EXECUTING("executing"),
    AWAITING_SIGNAL("awaiting_signal"),
    AWAITING_CHILDREN("awaiting_children"),
    DONE("done"),
    FAILED("failed"),
    CANCELLED("cancelled");

    private final String sqlName;

    InstanceStatus(String sqlName) {
        this.sqlName = sqlName;
    }

    public String sqlName() {
        return sqlName;
    }

    /** Done, failed and cancelled are final. */
    public boolean isTerminal() {
        return this == DONE || this == FAILED || this == CANCELLED;
    }

    /** Parked instances wait for a signal or for their children. */
    public boolean isParked() {
        return this == AWAITING_SIGNAL || this == AWAITING_CHILDREN;
    }

    public static InstanceStatus fromSql(String sqlName) {
        for (InstanceStatus status : values()) {
            if (status.sqlName.equals(sqlName)) {
                return status;
            }
        }
        throw new IllegalArgumentException("unknown instance status '" + sqlName + "'");
    }
}
