/**
 * The import rules of the layers (ARCHITECTURE.md, "The daemon in four layers"), checked by
 * daemon/test/imports.test.ts in the test suite, and by hand with
 *   npx depcruise --config .dependency-cruiser.cjs --ignore-known .dependency-cruiser-known-violations.json daemon/src renderer/src
 * Dependencies point down: api -> engine -> host (the contract's types in host/*.ts, never host/linux),
 * with the shared vocabulary (daemon/src/errors.ts, daemon/src/util/) below all three. The engine is
 * platform-neutral: what touches the machine (files, processes, native addons) is asked of the Host.
 * Violations that remain are listed in .dependency-cruiser-known-violations.json: that list may only shrink.
 */
/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'host-not-to-engine',
      comment: 'host/ implements the Host contract below the engine: it never imports engine/ (shared vocabulary lives in errors.ts and util/).',
      severity: 'error',
      from: { path: '^daemon/src/host/' },
      to: { path: '^daemon/src/engine/' },
    },
    {
      name: 'api-not-to-host',
      comment: 'api/ (and the UI server) speak HTTP to the engine: types they need come through the engine, never from host/.',
      severity: 'error',
      from: { path: '^daemon/src/(api|ui)/' },
      to: { path: '^daemon/src/host/' },
    },
    {
      name: 'engine-not-to-host-implementation',
      comment: 'The engine knows the Host contract (host/*.ts), never an implementation of it (host/linux, host/remote); its unit tests may use the in-memory one (host/fake).',
      severity: 'error',
      from: { path: '^daemon/src/engine/' },
      to: { path: '^daemon/src/host/[^/]+/', pathNot: '^daemon/src/host/fake/' },
    },
    {
      name: 'engine-not-to-host-fake',
      comment: 'The in-memory Host (host/fake) is for the engine\'s unit tests only.',
      severity: 'error',
      from: { path: '^daemon/src/engine/', pathNot: '\\.test\\.ts$' },
      to: { path: '^daemon/src/host/fake/' },
    },
    {
      name: 'engine-not-to-state-implementation',
      comment: 'The engine keeps its records and its build scratch through the contracts of state/ (state.ts, scratch.ts), never their file system implementations (state/fs*.ts; its unit tests may use them).',
      severity: 'error',
      from: { path: '^daemon/src/engine/', pathNot: '\\.test\\.ts$' },
      to: { path: '^daemon/src/state/fs' },
    },
    {
      name: 'engine-not-to-fs-or-processes',
      comment: 'The engine is platform-neutral: reading files of the machine and running programs are calls on the Host (its unit tests may make temporary files).',
      severity: 'error',
      from: { path: '^daemon/src/engine/', pathNot: '\\.test\\.ts$' },
      to: { dependencyTypes: ['core'], path: '^(node:)?(fs|fs/promises|child_process)$' },
    },
    {
      name: 'engine-not-to-native-addons',
      comment: 'The engine loads no native addon: the Host does (daemon/native).',
      severity: 'error',
      from: { path: '^daemon/src/engine/', pathNot: '\\.test\\.ts$' },
      to: { path: '(\\.node$|^daemon/native/)' },
    },
    {
      name: 'renderer-not-to-daemon-or-electron',
      comment: 'The renderer never knows where it runs: it talks to the daemon over its transport, never by import.',
      severity: 'error',
      from: { path: '^renderer/' },
      to: { path: '(^daemon/|^electron/|^electron$|node_modules/electron/)' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    exclude: { path: '(^|/)dist/' },
    // Type-only imports count: a layer that names another's types depends on it.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
    },
  },
};
