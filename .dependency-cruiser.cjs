// The layers of ARCHITECTURE.md, enforced: `npm run -s lint:deps` fails on an import that
// crosses them the wrong way. Paths are relative to the repository root.

/** The roles: whole programs built on the core (subcommands and the serve entry). */
const ROLES = ['^src/(diagnose|nodecache|connect|autoscale)/', '^src/(cli|serve|subcommands|validate)\\.ts$'];

/** The core is everything else under src/ (dns, kube, corefile, server, upstream, cluster, metrics, ...). */
const CORE = { path: '^src/', pathNot: ['^src/plugins/', ...ROLES] };

/** A plugin's own folder (its internals); src/plugins/*.ts is the framework beside them. */
const PLUGIN_FOLDER = '^src/plugins/[^/]+/';

module.exports = {
  forbidden: [
    {
      name: 'plugin-imports-another-plugin',
      comment:
        'A plugin is removed by deleting its folder and its line in order.ts, so no plugin imports another: move what they share into the core, or publish it on the instance (ClusterView, ZoneTransferSource) and find it through SetupContext.',
      severity: 'error',
      from: { path: '^src/plugins/([^/]+)/' },
      to: { path: PLUGIN_FOLDER, pathNot: '^src/plugins/$1/' },
    },
    {
      name: 'plugin-imports-a-role',
      comment:
        'Plugins (and their framework) stand on the core only; what a role and a plugin share moves into the core.',
      severity: 'error',
      from: { path: '^src/plugins/' },
      to: { path: ROLES },
    },
    {
      name: 'framework-imports-a-plugin',
      comment:
        'The framework (plugin.ts, fallthrough.ts, ...) names no plugin; order.ts alone lists them, each by a lazy import of its setup.',
      severity: 'error',
      from: { path: '^src/plugins/[^/]+\\.ts$', pathNot: '^src/plugins/order\\.ts$' },
      to: { path: PLUGIN_FOLDER },
    },
    {
      name: 'order-imports-a-plugin-eagerly',
      comment:
        "order.ts loads a plugin's code only when a Corefile uses it (import() in its line), so deleting the folder and the line removes it.",
      severity: 'error',
      from: { path: '^src/plugins/order\\.ts$' },
      to: { path: PLUGIN_FOLDER, dynamic: false },
    },
    {
      name: 'dns-imports-above-it',
      comment: 'src/dns/ is the wire format at the bottom: it imports nothing of ours outside src/dns/.',
      severity: 'error',
      from: { path: '^src/dns/' },
      to: { path: '^src/', pathNot: '^src/dns/' },
    },
    {
      name: 'kube-imports-dns-code',
      comment: 'src/kube/ is a Kubernetes API client that knows nothing of DNS (src/text/ helpers are fine).',
      severity: 'error',
      from: { path: '^src/kube/' },
      to: { path: ['^src/(dns|server|plugins|corefile|upstream|cluster|status)/', ...ROLES] },
    },
    {
      name: 'role-imports-plugin-internals',
      comment:
        'A role may use the plugin framework (src/plugins/*.ts) but never a plugin folder: what it needs moves into the core.',
      severity: 'error',
      from: { path: ROLES },
      to: { path: PLUGIN_FOLDER },
    },
    {
      name: 'core-imports-a-plugin',
      comment:
        'The core knows plugins only through the framework (plugin.ts contract, order.ts loaded by the runtime).',
      severity: 'error',
      from: CORE,
      to: { path: PLUGIN_FOLDER },
    },
    {
      name: 'core-loads-plugins-outside-the-runtime',
      comment:
        'Only the runtime loads plugin code (order.ts); the rest of the core sees the plugin.ts contract at most.',
      severity: 'error',
      from: { path: CORE.path, pathNot: [...CORE.pathNot, '^src/server/runtime\\.ts$'] },
      to: { path: '^src/plugins/[^/]+\\.ts$', pathNot: '^src/plugins/plugin\\.ts$' },
    },
    {
      name: 'core-imports-a-role',
      comment: 'Roles are built on the core, never the other way round.',
      severity: 'error',
      from: CORE,
      to: { path: ROLES },
    },
  ],
  options: {
    // Type-only imports couple layers too.
    tsPreCompilationDeps: true,
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)node_modules/' },
  },
};
