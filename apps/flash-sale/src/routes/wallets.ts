import type { FastifyInstance } from 'fastify'
import type { AppDeps } from '../app-deps.js'
import { inTransaction } from '../db/database.js'
import { setBalance, walletOf } from '../sql/wallets.js'
import { adminGuard } from './admin.js'
import { invalid } from './api-error.js'
import { WALLET_PARAMS, WALLET_PUT, type WalletBody } from './schemas.js'

/** Currency units with at most 2 decimals → cents (what the schema cannot say). */
function cents(balance: number): number {
  const c = Math.round(balance * 100)
  if (Math.abs(c - balance * 100) > 1e-6) throw invalid('balance', WALLET_PUT.config.rules.balance)
  return c
}

/**
 * GET /v1/wallets/:user_id: the user's balance, what was charged and how many charges (a user
 * without a wallet yet shows the default balance, DEFAULT_WALLET_BALANCE).
 */
export async function walletRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.get<{ Params: { user_id: string } }>('/v1/wallets/:user_id', WALLET_PARAMS, async (request) =>
    walletOf(deps.db, request.params.user_id, deps.orders.defaultWalletCents),
  )
}

/**
 * PUT /admin/wallets/:user_id `{ "balance": 150.00 }` (admin token): sets the balance. The wallet's
 * `funded` total moves by the difference, so balance = funded − charged + refunded still holds
 * (reconcile); the row is locked by the UPDATE, so a charge running at the same time is applied
 * before or after, never lost.
 */
export async function adminWalletRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  app.addHook('onRequest', adminGuard(deps.adminToken))
  app.put<{ Params: { user_id: string }; Body: WalletBody }>(
    '/admin/wallets/:user_id',
    { bodyLimit: 1_024, ...WALLET_PUT },
    async (request) => {
      const balanceCents = cents(request.body.balance)
      return inTransaction(deps.db, (c) =>
        setBalance(c, request.params.user_id, balanceCents, deps.orders.defaultWalletCents),
      )
    },
  )
}
