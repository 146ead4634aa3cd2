/** The engine's own version, reported by /version and `berthd --version`. */
export const ENGINE_VERSION = '0.1.0';
export const GIT_COMMIT = 'berth';
