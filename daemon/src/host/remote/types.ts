/**
 * Host values that cross the agent protocol as data of their own shape (see session.ts CustomType).
 */
import type { LogRecordBlock } from '../runtime.js';
import { parseBlock } from '../linux/runtime/logformat.js';
import type { CustomType } from './session.js';

/**
 * A block of log records crosses as the bytes of its lines (conmon's format) and is parsed again on arrival:
 * smaller than its columns, and the receiver gets a block it owns.
 */
const logBlock: CustomType = {
  name: 'logblock',
  test: (value) => {
    const v = value as Partial<LogRecordBlock>;
    return typeof v === 'object' && v !== null && v.offsets instanceof Int32Array && v.flags instanceof Uint8Array && Buffer.isBuffer(v.buf) && typeof v.seconds === 'function';
  },
  encode: (block: LogRecordBlock) => {
    if (block.count === 0) return Buffer.alloc(0);
    return block.buf.subarray(block.offsets[0], block.offsets[3 * (block.count - 1) + 2]! + 1);
  },
  decode: (lines: Buffer) => parseBlock(lines, 0, lines.length).block,
};

export const HOST_TYPES: CustomType[] = [logBlock];
