import { ServiceError } from './errors.js'

export class TimeoutError extends ServiceError {
  readonly code = 'E_TIMEOUT'
  constructor(ms: number) {
    super(`timed out after ${ms} ms`)
  }
}

/** Rejects with TimeoutError after ms; the operation itself is not cancelled. */
export async function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new TimeoutError(ms)), ms)
      }),
    ])
  } finally {
    clearTimeout(timer)
  }
}
