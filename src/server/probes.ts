// Names of the server's own probes (the loop plugin's HINFO queries to itself). They must
// reach every plugin each time they arrive: a cache that coalesced or stored them would
// hide a forwarding loop, since the looping copy would wait on the first instead of
// coming back through the loop detector.

export const selfProbeNames = new Set<string>();
