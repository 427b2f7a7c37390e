/**
 * A run's live output, decoded once: every chunk the backend streams becomes text (one decoder
 * per stream, so a character split across two chunks is not garbled) for the transports that
 * show it, and the text so far is what `get_run` answers while the run goes on.
 */
import { StringDecoder } from 'node:string_decoder';
import type { OutputChunk, StreamName } from '../runner/capture.js';

/** A chunk as the gateway hands it on: the bytes (for a terminal) and their text (for MCP, JSON). */
export interface LiveChunk extends OutputChunk {
  text: string;
}

export class LiveOutput {
  private readonly decoders = { stdout: new StringDecoder('utf8'), stderr: new StringDecoder('utf8') };
  readonly text: Record<StreamName, string> = { stdout: '', stderr: '' };

  add(chunk: OutputChunk): LiveChunk {
    const text = this.decoders[chunk.stream].write(chunk.data);
    this.text[chunk.stream] += text;
    return { ...chunk, text };
  }

  /** What the decoders still hold (a character cut off at the end), as chunks with no bytes. */
  end(): LiveChunk[] {
    return (['stdout', 'stderr'] as const).flatMap((stream) => {
      const text = this.decoders[stream].end();
      this.text[stream] += text;
      return text ? [{ stream, data: Buffer.alloc(0), text }] : [];
    });
  }
}
