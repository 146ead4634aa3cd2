/**
 * The Host contract: everything that must happen on the machine containers run on. Each part is declared in
 * its own file beside this one and gathered here; the engine imports the parts' types from this module
 * (engine -> host types is the one allowed direction), `host/linux` implements them on this machine.
 */
export * from './exec.js';
export * from './files.js';
export * from './layers.js';
export * from './network.js';
export * from './probe.js';
export * from './runtime.js';
export * from './stats.js';
export * from './volumes.js';
