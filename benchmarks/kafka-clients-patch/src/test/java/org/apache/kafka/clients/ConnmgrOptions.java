package org.apache.kafka.clients;

/**
 * Options the project's tests share (not a test class itself).
 */
public final class ConnmgrOptions {

    private ConnmgrOptions() {
    }

    /**
     * Every switch of {@link ConnectionManagementOptions} off, whatever the build's defaults: the switches-on build
     * flips those of {@link ConnectionManagementOptions#DEFAULTS}, so a test that sets only the switch it checks starts
     * from here.
     */
    public static ConnectionManagementOptions allOff() {
        return ConnectionManagementOptions.DEFAULTS
                .withBootstrapConnectionClose(false)
                .withRoleMetrics(null)
                .withEndpointChangeRetire(false)
                .withDnsRefreshMs(0L)
                .withConnectionsLingerMs(-1);
    }
}
