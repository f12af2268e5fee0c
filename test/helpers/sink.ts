// A writable stream that keeps what a command printed, for assertions.
import { Writable } from 'node:stream'

export class Sink extends Writable {
  readonly chunks: string[] = []
  override _write(chunk: Buffer | string, _enc: BufferEncoding, done: (err?: Error | null) => void): void {
    this.chunks.push(String(chunk))
    done()
  }
  get text(): string {
    return this.chunks.join('')
  }
}

/** A Sink with its text as a function, for tests that pass the stream and read it later. */
export function sink(): { stream: Sink; text: () => string } {
  const stream = new Sink()
  return { stream, text: () => stream.text }
}
