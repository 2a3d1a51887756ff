import { parseArgs } from 'node:util'
import { connectDb } from '../db/database.js'
import { migrate } from '../db/migrate.js'
import type { Command } from './command.js'

export const migrateCommand: Command = {
  name: 'migrate',
  summary: 'apply the SQL migrations (DATABASE_URL or --database-url)',
  async run(argv) {
    const { values } = parseArgs({ args: argv, options: { 'database-url': { type: 'string' } } })
    const url = values['database-url'] ?? process.env.DATABASE_URL
    if (!url) {
      console.error('flash-sale migrate: DATABASE_URL (or --database-url) is required')
      return 2
    }
    const db = connectDb(url, 1)
    try {
      const applied = await migrate(db)
      console.log(applied.length ? `applied: ${applied.join(', ')}` : 'up to date')
      return 0
    } finally {
      await db.end()
    }
  },
}
