import { ID_RULE } from '../domain/ids.js'
import type { PaymentMode } from '../domain/order-states.js'

/**
 * The JSON schemas of the routes' inputs, in one module, and the human rule of each field that
 * a 400 names (`error.field`, `error.rule`): Ajv's own words ("must be integer,string") say less
 * than ours. Types are exact: the app's Ajv does not coerce (app.ts), so `true` is not a product
 * id 1 and "9921" stays the string the client sent.
 */

/** Numeric keywords apply to numbers only and string keywords to strings only: one schema, both forms. */
const ID = {
  type: ['integer', 'string'],
  minimum: 1,
  maximum: Number.MAX_SAFE_INTEGER,
  pattern: '^[A-Za-z0-9_-]{1,64}$',
} as const

/** Printable ASCII without spaces, as Stripe and the IETF draft allow; a header sent twice joins with ', '. */
const IDEMPOTENCY_KEY = { type: 'string', pattern: '^[\\x21-\\x7e]{1,128}$' } as const

export interface SchemaRules {
  /** Field (as named in `error.field`) → the rule a 400 states. */
  rules: Record<string, string>
}

export const CHECKOUT = {
  schema: {
    body: {
      type: 'object',
      required: ['product_id', 'user_id'],
      properties: { product_id: ID, user_id: ID },
    },
    headers: { type: 'object', properties: { 'idempotency-key': IDEMPOTENCY_KEY } },
  },
  config: {
    rules: {
      body: 'expected a JSON object { "product_id": …, "user_id": … }',
      product_id: ID_RULE,
      user_id: ID_RULE,
      'Idempotency-Key': '1-128 printable ASCII characters without spaces, sent once',
    },
  } satisfies SchemaRules,
}

export interface CheckoutBody {
  product_id: number | string
  user_id: number | string
}

const ID_PARAM = { type: 'string', pattern: '^[A-Za-z0-9_-]{1,64}$' } as const

export const PRODUCT_PARAMS = {
  schema: { params: { type: 'object', properties: { product_id: ID_PARAM } } },
  config: { rules: { product_id: ID_RULE } } satisfies SchemaRules,
}

export const SALE_PUT = {
  schema: {
    params: { type: 'object', properties: { product_id: ID_PARAM } },
    body: {
      type: 'object',
      required: ['stock', 'price'],
      properties: {
        stock: { type: 'integer', minimum: 0, maximum: 10_000_000 },
        price: { type: 'number', minimum: 0, maximum: 1e9 },
        name: { type: 'string', minLength: 1, maxLength: 200 },
        starts_at: { type: ['string', 'null'] },
        ends_at: { type: ['string', 'null'] },
        per_user_limit: { type: 'integer', minimum: 1, maximum: 1_000 },
        payment: { type: 'string', enum: ['instant', 'hold'] },
        hold_seconds: { type: 'integer', minimum: 1, maximum: 86_400 },
      },
    },
  },
  config: {
    rules: {
      body: 'expected a JSON object',
      product_id: ID_RULE,
      stock: 'an integer from 0 to 10000000',
      price: 'a number from 0 to 1e9 (currency units, at most 2 decimals)',
      name: 'a string of 1 to 200 characters',
      starts_at: 'an ISO 8601 date-time, e.g. 2026-11-27T00:00:00Z, or null',
      ends_at: 'an ISO 8601 date-time, e.g. 2026-11-27T00:00:00Z, or null',
      per_user_limit: 'an integer from 1 to 1000',
      payment: '"instant" (charged when the order is persisted, the default) or "hold" (reserved until paid)',
      hold_seconds:
        'an integer from 1 to 86400: how long a reserved order of a "hold" sale waits for its payment; required with "hold", not allowed with "instant"',
    },
  } satisfies SchemaRules,
}

export const SALE_RESTOCK = {
  schema: {
    params: { type: 'object', properties: { product_id: ID_PARAM } },
    body: {
      type: 'object',
      required: ['units'],
      properties: { units: { type: 'integer', minimum: 1, maximum: 10_000_000 } },
    },
  },
  config: {
    rules: {
      body: 'expected a JSON object { "units": … }',
      product_id: ID_RULE,
      units: 'an integer from 1 to 10000000',
    },
  } satisfies SchemaRules,
}

export interface SaleBody {
  stock: number
  price: number
  name?: string
  starts_at?: string | null
  ends_at?: string | null
  per_user_limit?: number
  payment?: PaymentMode
  hold_seconds?: number
}

/** POST /v1/orders/:order_id/pay and /cancel: the buyer says who they are. */
export const ORDER_ACTION = {
  schema: {
    params: { type: 'object', properties: { order_id: { type: 'string', minLength: 1, maxLength: 128 } } },
    body: { type: 'object', required: ['user_id'], properties: { user_id: ID } },
  },
  config: {
    rules: {
      body: 'expected a JSON object { "user_id": … }',
      order_id: 'an order id as the checkout answered it',
      user_id: ID_RULE,
    },
  } satisfies SchemaRules,
}

/** POST /admin/orders/:order_id/refund: the order in the path; a body, if any, is ignored. */
export const ORDER_REFUND = {
  schema: {
    params: { type: 'object', properties: { order_id: { type: 'string', minLength: 1, maxLength: 128 } } },
  },
  config: { rules: { order_id: 'an order id as the checkout answered it' } } satisfies SchemaRules,
}

export interface OrderActionBody {
  user_id: number | string
}

export const QUEUE_JOIN = {
  schema: {
    params: { type: 'object', properties: { product_id: ID_PARAM } },
    body: { type: 'object', required: ['user_id'], properties: { user_id: ID } },
  },
  config: {
    rules: { body: 'expected a JSON object { "user_id": … }', product_id: ID_RULE, user_id: ID_RULE },
  } satisfies SchemaRules,
}

/** Header names as a client writes them, for `error.field` (Node lowercases them). */
export const HEADER_FIELDS: Record<string, string> = { 'idempotency-key': 'Idempotency-Key' }

/** A wallet's user, in the path: the checkout's ID rule (a number is sent as its digits). */
export const WALLET_PARAMS = {
  schema: { params: { type: 'object', properties: { user_id: ID_PARAM } } },
  config: { rules: { user_id: ID_RULE } } satisfies SchemaRules,
}

export const WALLET_PUT = {
  schema: {
    params: { type: 'object', properties: { user_id: ID_PARAM } },
    body: {
      type: 'object',
      required: ['balance'],
      properties: { balance: { type: 'number', minimum: 0, maximum: 1e9 } },
    },
  },
  config: {
    rules: {
      body: 'expected a JSON object { "balance": … }',
      user_id: ID_RULE,
      balance: 'a number from 0 to 1e9 (currency units, at most 2 decimals)',
    },
  } satisfies SchemaRules,
}

export interface WalletBody {
  balance: number
}
