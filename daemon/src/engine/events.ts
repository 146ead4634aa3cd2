import { EventEmitter } from 'node:events';
import { nowNano } from '../util/json.js';

export type EventType = 'container' | 'image' | 'volume' | 'network' | 'daemon' | 'plugin' | 'node' | 'service' | 'secret' | 'config' | 'builder';

/** One engine event, in the shape of the API's event record (newest version; api/compat trims it). */
export interface EngineEvent {
  Type: EventType;
  Action: string;
  Actor: { ID: string; Attributes: Record<string, string> };
  scope: 'local' | 'swarm';
  time: number;
  /** Nanoseconds since the epoch (beyond 2^53, hence a bigint; util/json writes it as a number). */
  timeNano: bigint;
  /** Legacy fields of container and image events; api/compat drops them for API 1.52 and later. */
  status?: string;
  id?: string;
  from?: string;
}

/**
 * Events kept for replay (`since`): as many as dockerd keeps. Each holds its actor's attributes (labels
 * included), so a longer history is megabytes of heap that an idle daemon carries.
 */
const HISTORY_LIMIT = 256;

/**
 * The event bus: publishes events to live subscribers and keeps the most recent ones so that
 * `GET /events?since=` can replay them.
 */
export class EventBus {
  private readonly emitter = new EventEmitter();
  private readonly history: EngineEvent[] = [];
  private lastNano = 0n;

  constructor() {
    this.emitter.setMaxListeners(0);
  }

  publish(type: EventType, action: string, id: string, attributes: Record<string, string> = {}): EngineEvent {
    let nano = nowNano();
    // Strictly increasing, so that since/until windows are exact and replay order is stable.
    if (nano <= this.lastNano) nano = this.lastNano + 1n;
    this.lastNano = nano;
    const event: EngineEvent = {
      Type: type,
      Action: action,
      Actor: { ID: id, Attributes: attributes },
      scope: 'local',
      time: Number(nano / 1_000_000_000n),
      timeNano: nano,
    };
    if (type === 'container' || type === 'image') {
      event.status = action;
      event.id = id;
      if (type === 'container' && attributes.image) event.from = attributes.image;
    }
    this.history.push(event);
    if (this.history.length > HISTORY_LIMIT) this.history.shift();
    this.emitter.emit('event', event);
    return event;
  }

  /** Events kept in memory whose time falls in [sinceNano, untilNano]. */
  past(sinceNano: bigint, untilNano?: bigint): EngineEvent[] {
    return this.history.filter((e) => e.timeNano >= sinceNano && (untilNano === undefined || e.timeNano <= untilNano));
  }

  subscribe(listener: (event: EngineEvent) => void): () => void {
    this.emitter.on('event', listener);
    return () => this.emitter.off('event', listener);
  }
}
