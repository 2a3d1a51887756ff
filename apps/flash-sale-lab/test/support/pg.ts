/** The machine's PostgreSQL, where the demo's `--sql postgres` creates a fresh database per strategy. */
export const PG_ADMIN_URL = process.env.TEST_PG_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
