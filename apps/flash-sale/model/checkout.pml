/*
 * The flash-sale checkout as fixed for issue 37 (items 1-3, 5), as a Promela model for spin:
 * reservations with the confirmation round (200 / 202), the worker (durability check, SQL,
 * settle, attempt counts, dead letters, a crash at every step), returns, restock, recorded
 * refusals, failover with replica lag, and scripts the Cluster client runs twice. The old
 * behaviours are knobs that must fail. Written from apps/flash-sale/src: sale/scripts/
 * {reserve,return-units,restock,preload}.lua, sale/sale-store.ts, orders/stream-consumer.ts,
 * orders/sql-sink.ts, orders/scripts/{settle,dead-letter}.lua, sql/order-batches.ts,
 * redis/replica-acks.ts, orders/unit-returns.ts, orders/payments.ts (refund), db/migrations/*.sql,
 * domain/order-states.ts. What it abstracts, and every configuration: README.md beside this file.
 *
 * Redis is one sale's keys, held three times in `rs`: copy 0 the master, copy 1 its replica
 * (asynchronous: a sync copies the master as it is, so the replica always holds a prefix of the
 * master's script runs), copy 2 a deposed master's data (REJOIN). SQL is one copy (durable).
 * Every step is one atomic block: a Redis script, a SQL transaction, a fault.
 *
 * Every -D below is a knob of a configuration (check.mjs passes them to spin -a).
 */
#ifndef U
#define U 1            /* users */
#endif
#ifndef LIMIT
#define LIMIT 1        /* per_user_limit */
#endif
#ifndef STOCK
#define STOCK 1        /* stock_total at the preload */
#endif
#ifndef CLICKS
#define CLICKS 1       /* checkouts per user (each a new click: a new Idempotency-Key if keyed) */
#endif
#ifndef KEYED
#define KEYED 0        /* 0 keyless; 1 every click has an Idempotency-Key; 2 user 0 keyless, the others keyed */
#endif
#ifndef RETRIES
#define RETRIES 0      /* repeats of a keyed click with its key, after any answer (a lost response too) */
#endif
#ifndef RESEND
#define RESEND 0       /* reserve.lua calls the Cluster client runs twice (a connection closed before the reply) */
#endif
#ifndef RESTOCKS
#define RESTOCKS 0     /* restocks of one unit by the admin */
#endif
#ifndef OPRESEND
#define OPRESEND 0     /* restock.lua calls run twice */
#endif
#ifndef PRELOADRESEND
#define PRELOADRESEND 0 /* 1: the sale's preload.lua is run again later (the same call, resent) */
#endif
#ifndef REFUNDS
#define REFUNDS 0      /* refunds of a confirmed order by the admin */
#endif
#ifndef FUNDS
#define FUNDS 0        /* orders the worker may fail INSUFFICIENT_FUNDS (the buyer's wallet) */
#endif
#ifndef FAILOVERS
#define FAILOVERS 0    /* the replica is promoted with whatever prefix it holds */
#endif
#ifndef REJOIN
#define REJOIN 0       /* 1: a deposed master comes back as a replica holding its old data (item 6) */
#endif
#ifndef VALIDITY
#define VALIDITY 0     /* 1: a replica is promotable only once synced since it (re)joined */
#endif
#ifndef CRASHES
#define CRASHES 0      /* worker crashes (any step; the restarted worker is a new consumer) */
#endif
#ifndef OUTAGES
#define OUTAGES 0      /* SQL outages met by the worker's attempts */
#endif
#ifndef MAXD
#define MAXD 2         /* maxDeliveries */
#endif
/* The old behaviours (each must fail). */
#ifndef OLD_UNITS
#define OLD_UNITS 0    /* unit = count + 1; a return only decrements the count */
#endif
#ifndef COUNTS
#define COUNTS 2       /* what dead-letters a claimed entry: 0 the OLD rule, Redis's delivery count (every read
                          raises it); 1 an attempt count in Redis, raised before a SQL attempt and lowered when it
                          ends (a failover can lose the lowering); 2 the attempt recorded in SQL per consumer,
                          raised in its own transaction, cleared in the attempt's transaction */
#endif
#define OLD_COUNTS (COUNTS == 0)
#ifndef OLD_RESERVE
#define OLD_RESERVE 0  /* reserve.lua not idempotent by order id */
#endif
#ifndef OLD_RESTOCK
#define OLD_RESTOCK 0  /* restock.lua without an operation id */
#endif
#ifndef OLD_PRELOAD
#define OLD_PRELOAD 0  /* preload.lua without an operation id: a rerun wipes the round */
#endif
#ifndef OLD_REFUSALS
#define OLD_REFUSALS 0 /* SOLD_OUT under a key answered as final at once, without confirmation */
#endif
#ifndef OLD_RESTOCK_TX
#define OLD_RESTOCK_TX 0 /* the current restock: Redis inside the open SQL transaction, which may roll back (item 4) */
#endif

#define K (U * CLICKS)                                  /* idempotency keys 1..K */
#define OMAX (U * CLICKS * (RETRIES + 1) + RESEND)      /* order ids 1..OMAX (<= 7: one bit each) */
#define E (OMAX + RESEND)                               /* stream entries */
#define NO (OMAX + 1)
#if (U * CLICKS * (RETRIES + 1) + RESEND) > 7
#error "at most 7 order ids: U * CLICKS * (RETRIES + 1) + RESEND <= 7 (one bit each in a byte)"
#endif
#if CRASHES > 3 || RESTOCKS > 7 || U * CLICKS > 15
#error "CRASHES <= 3 (consumers in 4 bits), RESTOCKS <= 7, U * CLICKS <= 15"
#endif

/* One copy of the sale's Redis keys: field offsets. */
#define F_STOCK 0      /* {sale}:stock */
#define F_TOTAL 1      /* meta stock_total */
#define F_OPS 2        /* meta: the operation ids applied (bit 0 the preload, bit p restock p) */
#define F_ST 3         /* status hash: bit o = order o has a status */
#define F_RET 4        /* returned hash: bit o = order o's unit went back */
#define F_CNT 5        /* OLD_UNITS buyer record: count per user */
#define F_SLOT (F_CNT + U)            /* buyer record: the order holding unit k+1 of user u, 0 = free */
#define F_IDEM (F_SLOT + U * LIMIT)   /* idem hash: code * 8 + order, per key 1..K */
#define F_E (F_IDEM + K + 1)          /* the stream: 5 per entry */
#define SZ (F_E + 5 * E)

#define R(c, f) rs[(c) * SZ + (f)]
#define M(f) R(0, f)
#define SLOT(u, k) M(F_SLOT + (u) * LIMIT + (k))
#define IDEM(k) M(F_IDEM + (k))
#define EO(e) M(F_E + 5 * (e))        /* order id */
#define EU(e) M(F_E + 5 * (e) + 1)    /* unit_no */
#define EP(e) M(F_E + 5 * (e) + 2)    /* 0 absent, 1 new (not delivered), 2 pending, 3 acknowledged, 4 dead-lettered */
#define EW(e) M(F_E + 5 * (e) + 3)    /* consumer it is pending with (worker incarnation) */
#define EC(e) M(F_E + 5 * (e) + 4)    /* COUNTS 0: Redis's delivery count; 1: the attempt count */
#define BIT(o) (1 << (o))
/* COUNTS 2: the other consumers (dead ones: one worker runs at a time) with an open attempt */
#define OTHERS(e) ((att[e] & ~BIT(me)) & 1) + (((att[e] & ~BIT(me)) >> 1) & 1) + (((att[e] & ~BIT(me)) >> 2) & 1) + (((att[e] & ~BIT(me)) >> 3) & 1)
/* a claimed entry goes to the dead letters (stream-consumer.ts #process) */
#define DEAD(e) ((COUNTS == 0 && EC(e) > MAXD) || (COUNTS == 1 && EC(e) >= MAXD) || (COUNTS == 2 && OTHERS(e) >= MAXD))
#define HAS(f, o) ((M(f) & BIT(o)) != 0)

#define P_NEW 1
#define P_PENDING 2
#define P_ACKED 3
#define P_DEAD 4

/* answers */
#define RESERVED 1
#define SOLD_OUT 2
#define ALREADY 3

/* SQL order states (orders.status + failure_reason) */
#define S_CONF 1       /* confirmed: live */
#define S_REFUNDED 2
#define S_FUNDS 3      /* failed INSUFFICIENT_FUNDS */
#define S_DUPUNIT 4    /* failed duplicate_unit */
#define S_SOLDOUT 5    /* failed sold_out_in_sql */
#define RET_PENDING 1
#define RET_DONE 2

byte rs[3 * SZ];
bool hasRep = 1;     /* the Cluster's view: the master has a replica (else it is alone) */
bool repStale;       /* the replica rejoined with old data and has not synced since */
bool oldDown;        /* a deposed master that may rejoin (REJOIN) */
byte failovers;
byte nextE;          /* entries ever added (stream ids only grow) */
byte nextO;          /* order ids used */

/* SQL */
byte sqlStock = STOCK;
byte sqlSold;
byte ordSt[NO];
byte ordUnit[NO];
byte uret[NO];       /* unit_return */
byte sqlOps;         /* restock operations applied in SQL */
byte att[E];         /* COUNTS 2: bit w = consumer w began a SQL attempt on the entry that no result ended */

/* the worker */
byte wph;            /* 0 idle, 1 read and raised (SQL attempt next), 2 persisted (settle next) */
byte wcur;           /* its entry */
byte me;             /* its incarnation: the consumer name in the group */
byte crashes;
byte outages;
byte fundsFails;

/* the admin */
byte aph;            /* restock: 0 idle, 1 Redis call next, 2 the call resent */
byte restocks;
byte refunds;
byte opResends;

/* clients */
byte inCall;
byte clientsDone;
byte resends;
byte preResends;
bool draining;       /* no more faults: the replica syncs, the worker runs, everything settles */

/* ghosts: what was promised, what happened */
byte ordUser[NO];
byte ans200;         /* bit o: order o was answered 200 */
byte fa[K + 1];      /* the first final answer per key: code * 8 + order */
byte diedIn[E];      /* worker deaths during an attempt on the entry that began with SQL reachable */
byte i;              /* scratch, always 0 between steps */
byte j;

/* The replica catches up (asynchronous replication: a prefix, here all of it). */
inline copyTo(to, from) {
  i = 0;
  do
  :: i < SZ -> rs[(to) * SZ + i] = rs[(from) * SZ + i]; i++
  :: else -> break
  od;
  i = 0
}

/*
 * redis/replica-acks.ts confirmOutcome: durable when a replica acknowledged (WAIT; it then holds
 * everything the master answered) or when the Cluster shows the master alone (no replica to
 * promote). A WAIT may time out while not draining (the replica paused or cut off). `g`: the
 * failovers counted when the writes ran; a round after a failover goes to another node ('error').
 */
inline durable(g, ok) {
  if
  :: failovers != g -> ok = 0   /* the slot moved since the writes: another node, says nothing of them */
  :: failovers == g && !hasRep -> ok = 1
  :: failovers == g && hasRep -> copyTo(1, 0); repStale = 0; ok = 1
  :: failovers == g && hasRep && !draining -> ok = 0
  fi
}

/* The first final answer a key got; any later one must be the same. */
inline final(k, code, oid) {
  if
  :: k != 0 && fa[k] == 0 -> fa[k] = code * 8 + oid
  :: k != 0 && fa[k] != 0 ->
     oneKeyOneFinalAnswer = (fa[k] == code * 8 + oid);
     assert(oneKeyOneFinalAnswer)
  :: else -> skip
  fi
}

/*
 * reserve.lua for one checkout (user u, order id o, key k) on the master. The key's stored answer
 * first; then (fixed) the order's status: this checkout ran before, its first answer; then the
 * limit, the stock, and the reservation: XADD, the stock, the buyer record, the status, the key.
 * The buyer record lists the user's live orders by unit slot; a new order takes the smallest free
 * unit (OLD_UNITS: count + 1).
 */
inline reserve(u, o, k, code, oid) {
  if
  :: k != 0 && IDEM(k) != 0 -> code = IDEM(k) / 8; oid = IDEM(k) % 8
  :: else ->
     if
     :: !OLD_RESERVE && HAS(F_ST, o) -> code = RESERVED; oid = o
     :: else ->
        unit = 0;
        if
        :: OLD_UNITS ->
           if
           :: M(F_CNT + u) < LIMIT -> unit = M(F_CNT + u) + 1
           :: else -> skip
           fi
        :: else ->
           j = LIMIT;
           do
           :: j > 0 && SLOT(u, j - 1) == 0 -> unit = j; j--
           :: j > 0 && SLOT(u, j - 1) != 0 -> j--
           :: j == 0 -> break
           od
        fi;
        if
        :: unit == 0 -> code = ALREADY; oid = 0
        :: unit != 0 && M(F_STOCK) == 0 -> code = SOLD_OUT; oid = 0
        :: unit != 0 && M(F_STOCK) > 0 ->
           EO(nextE) = o; EU(nextE) = unit; EP(nextE) = P_NEW; nextE++;
           M(F_STOCK)--;
           if
           :: OLD_UNITS -> M(F_CNT + u)++
           :: else -> SLOT(u, unit - 1) = o
           fi;
           M(F_ST) = M(F_ST) | BIT(o);
           ordUser[o] = u;
           code = RESERVED; oid = o
        fi;
        unit = 0;
        if
        :: k != 0 -> IDEM(k) = code * 8 + oid
        :: else -> skip
        fi
     fi
  fi
}

/* return-units.lua for order o on the master: once per order id, the unit back, the slot freed. */
inline returnUnits(o) {
  if
  :: HAS(F_RET, o) -> skip
  :: else ->
     M(F_RET) = M(F_RET) | BIT(o);
     M(F_STOCK)++;
     if
     :: OLD_UNITS ->
        if
        :: M(F_CNT + ordUser[o]) > 0 -> M(F_CNT + ordUser[o])--
        :: else -> skip
        fi
     :: else ->
        j = 0;
        do
        :: j < LIMIT && SLOT(ordUser[o], j) == o -> SLOT(ordUser[o], j) = 0; j++
        :: j < LIMIT && SLOT(ordUser[o], j) != o -> j++
        :: j == LIMIT -> break
        od;
        j = 0
     fi
  fi
}

/* restock.lua of operation p on the master (fixed: applied once per operation id). */
inline restockRedis(p) {
  if
  :: !OLD_RESTOCK && !OLD_RESTOCK_TX && (M(F_OPS) & BIT(p)) != 0 -> skip
  :: else ->
     M(F_OPS) = M(F_OPS) | BIT(p);
     M(F_STOCK)++;
     M(F_TOTAL)++
  fi
}

/* The worker's SQL transaction for entry e (sql/order-batches.ts persistBatch, one event). */
inline persist(e) {
  o = EO(e);
  if
  :: o == 0 -> skip   /* the entry is gone from this master (a stale master promoted): nothing to write */
  :: o != 0 && ordSt[o] != 0 -> skip   /* duplicate: an earlier delivery wrote it */
  :: o != 0 && ordSt[o] == 0 ->
     ordUnit[o] = EU(e);
     /* orders_one_unit_per_user: (product, round, user, unit_no) over live statuses */
     j = 1;
     do
     :: j <= OMAX && j != o && ordUser[j] == ordUser[o] && ordSt[j] == S_CONF && ordUnit[j] == ordUnit[o] ->
        dup = 1; j++
     :: j <= OMAX && !(j != o && ordUser[j] == ordUser[o] && ordSt[j] == S_CONF && ordUnit[j] == ordUnit[o]) -> j++
     :: j > OMAX -> break
     od;
     j = 0;
     if
     :: dup -> ordSt[o] = S_DUPUNIT; uret[o] = RET_PENDING
     :: !dup && sqlSold >= sqlStock -> ordSt[o] = S_SOLDOUT
     :: !dup && sqlSold < sqlStock && fundsFails < FUNDS ->
        fundsFails++; ordSt[o] = S_FUNDS; uret[o] = RET_PENDING
     :: !dup && sqlSold < sqlStock -> ordSt[o] = S_CONF; sqlSold++
     fi;
     dup = 0;
     printf("EVENT SQL persists order %d unit %d: state %d (1 confirmed, 3 funds, 4 duplicate_unit, 5 sold_out_in_sql)\n", o, ordUnit[o], ordSt[o]);
     noOversellInSql = (sqlSold <= sqlStock);
     assert(noOversellInSql);
     /* a user never holds more live units than the limit */
     j = 1; n = 0;
     do
     :: j <= OMAX && ordUser[j] == ordUser[o] && ordSt[j] == S_CONF -> n++; j++
     :: j <= OMAX && !(ordUser[j] == ordUser[o] && ordSt[j] == S_CONF) -> j++
     :: j > OMAX -> break
     od;
     withinLimit = (n <= LIMIT);
     assert(withinLimit);
     j = 0; n = 0
  fi;
  o = 0
}

/* A user's checkouts: each click is reserve.lua (maybe run twice), then the answer. */
proctype Client(byte u) {
  byte c, k, tries, o, code, oid, unit, g;
  bool resend, ok, oneKeyOneFinalAnswer;
end:
  do
  :: c < CLICKS ->
     if
     :: KEYED == 1 || (KEYED == 2 && u > 0) -> k = u * CLICKS + c + 1
     :: else -> k = 0
     fi;
     tries = 0;
     do
     :: atomic {
          nextO < OMAX;
          o = nextO + 1;
          reserve(u, o, k, code, oid); g = failovers;
          printf("EVENT user %d checkout (order %d, key %d): script answers %d order %d (1 RESERVED, 2 SOLD_OUT, 3 ALREADY)\n", u, o, k, code, oid);
          if
          :: resends < RESEND && !draining -> resends++; resend = 1; inCall++
          :: true -> skip
          fi;
          if
          :: (code == RESERVED && oid == o) || resend -> nextO = o
          :: else -> skip
          fi
        }
        /* The Cluster client resends the call (the connection closed before the reply): the
         * script runs again, any time later; the client reads the second reply only. */
        atomic {
          if
          :: resend ->
             reserve(u, o, k, code, oid); g = failovers;
             printf("EVENT user %d checkout (order %d) RUN AGAIN: answers %d order %d\n", u, o, code, oid);
             resend = 0; inCall--
          :: else -> skip
          fi;
          if
          :: code == RESERVED ->
             durable(g, ok);
             if
             :: ok ->
                ans200 = ans200 | BIT(oid);
                printf("EVENT user %d: 200 order %d\n", u, oid);
                final(k, code, oid)
             :: else -> printf("EVENT user %d: 202 order %d\n", u, oid)
             fi
          :: code != RESERVED && k == 0 -> printf("EVENT user %d: 409 (%d), keyless\n", u, code)
          :: code == SOLD_OUT && k != 0 && OLD_REFUSALS ->
             printf("EVENT user %d: 409 SOLD_OUT for key %d, at once\n", u, k);
             final(k, code, oid)
          :: code != RESERVED && k != 0 && !(code == SOLD_OUT && OLD_REFUSALS) ->
             durable(g, ok);
             if
             :: ok ->
                printf("EVENT user %d: 409 (%d) for key %d, shown durable\n", u, code, k);
                final(k, code, oid)
             :: else -> printf("EVENT user %d: 503 for key %d (the refusal is not durable)\n", u, k)
             fi
          fi;
          o = 0; code = 0; oid = 0; ok = 0; g = 0
        }
        if
        :: k != 0 && tries < RETRIES -> tries++
        :: true -> break
        fi
     :: nextO >= OMAX -> break
     od;
     c++; k = 0; tries = 0
  :: c == CLICKS -> atomic { clientsDone++; c++ }
  od
}

/*
 * orders/stream-consumer.ts with orders/sql-sink.ts, one entry at a time: own pending entries
 * first, then a dead consumer's (XAUTOCLAIM), then new ones; the read is confirmed durable or
 * held back; a claimed entry is dead-lettered when its count says a worker died on it; the
 * attempt count is raised before the SQL attempt and lowered when it ends (result or outage);
 * settle.lua acknowledges. The worker may crash at any step; its successor is a new consumer.
 */
proctype Worker() {
  byte e, o, n, kind;
  bool ok, dup, noOversellInSql, withinLimit, noPersistableOrderDeadLettered;
end:
  do
  :: atomic {
       wph == 0;
       /* kind 1 own pending, 2 claimed, 3 new; the first in stream order */
       e = 0; kind = 0;
       do
       :: e < nextE && EP(e) == P_PENDING && EW(e) == me -> kind = 1; break
       :: e < nextE && !(EP(e) == P_PENDING && EW(e) == me) -> e++
       :: e == nextE -> break
       od;
       if
       :: kind == 0 ->
          e = 0;
          do
          :: e < nextE && EP(e) == P_PENDING -> kind = 2; break
          :: e < nextE && EP(e) != P_PENDING -> e++
          :: e == nextE -> break
          od
       :: else -> skip
       fi;
       if
       :: kind == 0 ->
          e = 0;
          do
          :: e < nextE && EP(e) == P_NEW -> kind = 3; break
          :: e < nextE && EP(e) != P_NEW -> e++
          :: e == nextE -> break
          od
       :: else -> skip
       fi;
       if
       :: kind == 0 -> skip   /* nothing to read: the step does nothing */
       :: kind != 0 ->
          EP(e) = P_PENDING; EW(e) = me;
          if
          :: OLD_COUNTS && EC(e) <= MAXD -> EC(e)++   /* every read adds a delivery (saturated above MAXD) */
          :: else -> skip
          fi;
          durable(failovers, ok);
          if
          :: !ok ->
             printf("EVENT worker %d reads entry %d (order %d, kind %d): not durable, held back\n", me, e, EO(e), kind)
          :: ok && kind == 2 && DEAD(e) ->
             /* dead-letter.lua */
             EP(e) = P_DEAD;
             printf("EVENT worker %d DEAD-LETTERS entry %d (order %d): count %d, died in %d attempts\n", me, e, EO(e), (COUNTS == 2 -> OTHERS(e) : EC(e)), diedIn[e]);
             noPersistableOrderDeadLettered = (diedIn[e] >= MAXD);
             assert(noPersistableOrderDeadLettered)
          :: ok && !(kind == 2 && DEAD(e)) ->
             if
             :: COUNTS == 1 -> EC(e)++   /* the attempt begins: raised in Redis */
             :: COUNTS == 2 -> att[e] = att[e] | BIT(me)   /* the attempt begins: recorded in SQL */
             :: COUNTS == 0 -> skip
             fi;
             printf("EVENT worker %d reads entry %d (order %d, kind %d): durable\n", me, e, EO(e), kind);
             wcur = e; wph = 1
          fi
       fi;
       e = 0; kind = 0; ok = 0
     }
  :: atomic {
       wph == 1 && outages < OUTAGES && !draining ->
       /* SinkUnavailableError: the attempt ends in an outage, the consumer backs off */
       outages++;
       if
       :: COUNTS == 1 && EC(wcur) > 0 -> EC(wcur)--
       :: else -> skip   /* COUNTS 2: the record stays until this consumer's next attempt ends */
       fi;
       printf("EVENT worker %d: SQL outage on entry %d\n", me, wcur);
       wph = 0; wcur = 0
     }
  :: atomic {
       wph == 1 ->
       persist(wcur);
       if
       :: COUNTS == 2 -> att[wcur] = att[wcur] & ~BIT(me)   /* in the same transaction */
       :: else -> skip
       fi;
       wph = 2
     }
  :: atomic {
       wph == 2 ->
       /* settle.lua: XACK and the status; the attempt ends (lowered) */
       if
       :: EP(wcur) == P_PENDING -> EP(wcur) = P_ACKED
       :: else -> skip
       fi;
       if
       :: COUNTS == 1 && EC(wcur) > 0 -> EC(wcur)--   /* the attempt ends: lowered in Redis */
       :: else -> skip
       fi;
       wph = 0; wcur = 0
     }
  :: atomic {
       crashes < CRASHES && !draining ->
       crashes++;
       /* the truth: it dies during an attempt that began with SQL reachable and no result ended */
       if
       :: COUNTS != 2 && wph != 0 -> diedIn[wcur]++
       :: else -> skip
       fi;
       e = 0;
       do
       :: COUNTS == 2 && e < nextE && (att[e] & BIT(me)) != 0 -> diedIn[e]++; e++
       :: COUNTS == 2 && e < nextE && (att[e] & BIT(me)) == 0 -> e++
       :: COUNTS != 2 || e == nextE -> break
       od;
       e = 0;
       printf("EVENT worker %d CRASHES (phase %d, entry %d); a new consumer starts\n", me, wph, wcur);
       me++; wph = 0; wcur = 0
     }
  od
}

/*
 * orders/unit-returns.ts give / resumePending: an order SQL gave up (unit_return pending) goes back
 * in Redis through return-units.lua, and is marked done only once that is shown durable.
 */
proctype Returns() {
  byte o;
  bool ok;
end:
  do
  :: atomic {
       select(o : 1 .. OMAX);
       if
       :: uret[o] == RET_PENDING ->
          returnUnits(o);
          durable(failovers, ok);
          if
          :: ok -> uret[o] = RET_DONE; printf("EVENT order %d: its unit is back (return done)\n", o)
          :: else -> printf("EVENT order %d: returned on the master, not durable (stays pending)\n", o)
          fi
       :: else -> skip
       fi;
       o = 0; ok = 0
     }
  od
}

/* The admin: refunds (orders/payments.ts refund: SQL first, then the return) and restocks. */
proctype Admin() {
  byte o;
  bool ok;
end:
  do
  :: atomic {
       refunds < REFUNDS && sqlSold > 0 ->
       select(o : 1 .. OMAX);
       if
       :: ordSt[o] == S_CONF ->
          refunds++; ordSt[o] = S_REFUNDED; sqlSold--; uret[o] = RET_PENDING;
          printf("EVENT admin refunds order %d\n", o)
       :: else -> skip
       fi;
       o = 0
     }
  /* restock, fixed: SQL commits (stock_total + 1, its operation id) ... */
  :: atomic {
       !OLD_RESTOCK_TX && aph == 0 && restocks < RESTOCKS ->
       restocks++; sqlStock++; sqlOps = sqlOps | BIT(restocks);
       printf("EVENT admin restocks 1 unit in SQL (operation %d)\n", restocks);
       aph = 1
     }
  /* ... then restock.lua with the operation id, repeated until shown durable (maybe run twice). */
  :: atomic {
       !OLD_RESTOCK_TX && aph >= 1 ->
       restockRedis(restocks);
       if
       :: aph == 1 && opResends < OPRESEND && !draining ->
          opResends++; aph = 2;
          printf("EVENT restock.lua %d runs; the client will resend it\n", restocks)
       :: else ->
          durable(failovers, ok);
          if
          :: ok -> aph = 0; printf("EVENT restock %d in Redis, durable\n", restocks)
          :: else -> aph = 1; printf("EVENT restock %d in Redis, not durable: repeated\n", restocks)
          fi
       fi;
       ok = 0
     }
  /* the current code (item 4): restock.lua inside the open SQL transaction, which may roll back */
  :: atomic {
       OLD_RESTOCK_TX && aph == 0 && restocks < RESTOCKS ->
       restocks++;
       restockRedis(restocks);
       printf("EVENT restock.lua runs inside the open SQL transaction\n");
       aph = 1
     }
  :: atomic {
       OLD_RESTOCK_TX && aph == 1 ->
       if
       :: sqlStock++; printf("EVENT the restock's SQL transaction commits\n")
       :: !draining -> printf("EVENT the restock's SQL transaction ROLLS BACK\n")
       fi;
       aph = 0
     }
  od
}

/* Faults: replication, failover, a deposed master rejoining, preload.lua resent; then the drain. */
proctype Faults() {
end:
  do
  :: atomic { hasRep -> copyTo(1, 0); repStale = 0 }
  :: atomic {
       failovers < FAILOVERS && hasRep && !draining && (!VALIDITY || !repStale) ->
       if
       :: REJOIN -> copyTo(2, 0); oldDown = 1
       :: else -> skip
       fi;
       copyTo(0, 1);
       hasRep = 0;
       failovers++;
       printf("EVENT FAILOVER: the replica is promoted with its prefix; the new master is alone\n")
     }
  :: atomic {
       REJOIN && oldDown && !draining ->
       copyTo(1, 2); oldDown = 0; hasRep = 1; repStale = 1;
       printf("EVENT the deposed master rejoins as a replica with its old data (full sync under way)\n")
     }
  :: atomic {
       preResends < PRELOADRESEND && !draining ->
       preResends++;
       if
       :: OLD_PRELOAD ->
          j = 0;
          do
          :: j < U -> M(F_CNT + j) = 0; j++
          :: j == U -> break
          od;
          j = 0;
          do
          :: j < U * LIMIT -> M(F_SLOT + j) = 0; j++
          :: j == U * LIMIT -> break
          od;
          j = 1;
          do
          :: j <= K -> IDEM(j) = 0; j++
          :: j > K -> break
          od;
          j = 0;
          M(F_ST) = 0; M(F_RET) = 0; M(F_STOCK) = STOCK; M(F_TOTAL) = STOCK;
          printf("EVENT preload.lua RUN AGAIN: buyers, keys and statuses wiped, stock reset\n")
       :: else -> printf("EVENT preload.lua run again: its operation id is recorded, nothing done\n")
       fi
     }
  :: atomic { !draining -> draining = 1; printf("EVENT drain: no more faults\n") }
  od
}

/*
 * Once drained (no faults, every client done, the worker and the admin idle, no entry new or
 * pending on the master, no return pending): every promise is checked against what is there.
 */
proctype Check() {
  byte o, n, live;
  bool quiet, every200EndsLive, booksBalance, withinLimit;
end:
  do
  :: atomic {
       draining && clientsDone == U && inCall == 0 && wph == 0 && aph == 0 ->
       quiet = 1;
       o = 0;
       do
       :: o < nextE -> quiet = quiet && EP(o) != P_NEW && EP(o) != P_PENDING; o++
       :: o == nextE -> break
       od;
       o = 1;
       do
       :: o <= OMAX -> quiet = quiet && uret[o] != RET_PENDING; o++
       :: o > OMAX -> break
       od;
       o = 0;
       if
       :: quiet ->
          printf("EVENT drained: checking every 200, the books, the limit\n");
          o = 1;
          do
          :: o <= OMAX ->
             every200EndsLive = ((ans200 & BIT(o)) == 0 || ordSt[o] == S_CONF || ordSt[o] == S_REFUNDED || ordSt[o] == S_FUNDS);
             if
             :: !every200EndsLive -> printf("EVENT order %d was answered 200 and ends in state %d (0: not in SQL)\n", o, ordSt[o])
             :: else -> skip
             fi;
             assert(every200EndsLive);
             if
             :: ordSt[o] == S_CONF -> live++
             :: else -> skip
             fi;
             o++
          :: o > OMAX -> break
          od;
          /* stock = sold + remaining (nothing in flight once drained), in Redis and SQL alike */
          booksBalance = (M(F_TOTAL) == sqlStock && M(F_STOCK) + sqlSold == sqlStock && live == sqlSold);
          if
          :: !booksBalance -> printf("EVENT books: Redis total %d remaining %d, SQL stock %d sold %d\n", M(F_TOTAL), M(F_STOCK), sqlStock, sqlSold)
          :: else -> skip
          fi;
          assert(booksBalance);
          n = 0;
          do
          :: n < U ->
             live = 0; o = 1;
             do
             :: o <= OMAX && ordUser[o] == n && ordSt[o] == S_CONF -> live++; o++
             :: o <= OMAX && !(ordUser[o] == n && ordSt[o] == S_CONF) -> o++
             :: o > OMAX -> break
             od;
             withinLimit = (live <= LIMIT);
             assert(withinLimit);
             n++
          :: n == U -> break
          od;
          break
       :: else -> quiet = 0
       fi
     }
  od
}

init {
  atomic {
    byte c;
    for (c : 0 .. 1) {
      R(c, F_STOCK) = STOCK;
      R(c, F_TOTAL) = STOCK;
      R(c, F_OPS) = 1
    }
    for (c : 0 .. U - 1) {
      run Client(c)
    }
    run Worker();
    run Returns();
    run Admin();
    run Faults();
    run Check()
  }
}
