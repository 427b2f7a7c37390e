/** Sizing of the warm pools (config `pool:`). */
export interface PoolOptions {
  enabled: boolean;
  /** Idle containers each pool keeps ready when demand is low. */
  minIdle: number;
  /** Most containers (idle + starting) one pool holds. */
  maxSize: number;
  /** Most pool containers (idle + starting) across all pools. */
  maxTotal: number;
  /**
   * Idle containers older than this are replaced with fresh ones, and a pool no run asked for in
   * this long goes (pre-warmed ones stay).
   */
  maxIdleSeconds: number;
  /** The longest a run may take (the deadline ceiling): a pool container's expiry label covers it. */
  maxRunSeconds: number;
  /** Containers being started at once, across pools (starts are CPU-bound). */
  maxStarting: number;
  /** How often idle containers are checked and aged out. */
  checkIntervalSeconds: number;
}

export const DEFAULT_POOL_OPTIONS: PoolOptions = {
  enabled: true,
  minIdle: 2,
  maxSize: 8,
  maxTotal: 32,
  maxIdleSeconds: 300,
  maxRunSeconds: 3600,
  maxStarting: 4,
  checkIntervalSeconds: 10,
};
