/*
 * kunci's Redlock with fencing tokens and the restart quarantine, as a Promela model for spin.
 * Written from src/lock/scripts/{acquire,acquire-one,release,extend}.lua, node-ops.ts
 * (attemptAcquire, extendAll), node-link.ts (the vote gate), node-health.ts (#quarantineFor)
 * and fence-clock.ts. What it abstracts, and every configuration: README.md beside this file.
 *
 * Time is one integer, `now` (real time, in ticks), advanced by the process Time. A client's
 * monotonic clock is `now` (no rate drift: the drift allowance covers that); a client's wall
 * clock is now + coff(c); a node's wall clock is now + off[n], which a clock step moves. Redis
 * expires keys by its wall clock; proposals come from the client's wall clock.
 *
 * Every -D below is a knob of a configuration (check.mjs passes them to spin -a).
 */
#ifndef TTL
#define TTL 3         /* lock TTL = maxTtlMs (the longest TTL in use) */
#endif
#ifndef NT
#define NT 1          /* nodeTimeoutMs: a vote counts only if sent within NT of the attempt's start */
#endif
#ifndef TOL
#define TOL 1         /* clockToleranceMs (first contact) */
#endif
#ifndef QMODE
#define QMODE 2       /* 0 no quarantine; 1 the OLD one (maxTtl - INFO uptime); 2 the new one; 3 new + firstContact: 'full' */
#endif
#ifndef CRASHES
#define CRASHES 1     /* node crashes (each followed by a restart, any time later) */
#endif
#ifndef EMPTY
#define EMPTY 1       /* 1: a restarted node has lost its keys (no AOF, everysec, empty restart) */
#endif
#ifndef STEPS
#define STEPS 0       /* wall-clock steps on nodes */
#endif
#ifndef STEP
#define STEP 4        /* size of a step, forward */
#endif
#ifndef STEPLIVE
#define STEPLIVE 0    /* 1: a step may hit a node holding a live lock key (cuts its TTL: a known limit) */
#endif
#ifndef BEHIND
#define BEHIND 0      /* 1: a node restarts with its clock STEP behind; the step brings it back */
#endif
#ifndef SKEW
#define SKEW 0        /* client 1's wall clock is SKEW behind client 0's (and the nodes') */
#endif
#ifndef EXTEND
#define EXTEND 0      /* extensions per client (extend.lua) */
#endif
#ifndef HANDOVER
#define HANDOVER 0    /* holders may hand over to a local waiter (acquire.lua with prev) */
#endif
#ifndef LOSS
#define LOSS 1        /* requests and replies may be lost */
#endif
#ifndef ATT0
#define ATT0 1        /* acquire attempts (hand-overs included) of client 0 */
#endif
#ifndef ATT1
#define ATT1 1        /* ... and of client 1 */
#endif
#ifndef HORIZON
#define HORIZON 5     /* ticks of time explored */
#endif

#ifndef FIRST
#define FIRST 0       /* 1: client 1 is a new process that never saw the nodes (first contact) */
#endif
#ifndef CHECK
#define CHECK 7       /* properties checked: 1 mutual exclusion, 2 fence order, 4 fenced resource */
#endif

#define N 3
#define Q 2
#define C 2
/* Nodes have run long enough before the model starts that nobody quarantines them at first sight. */
#define S0 (TTL + TOL + SKEW + 1)
#define TMAX (S0 + HORIZON)

#define coff(c) (c == 1 -> -SKEW : 0)
#define nwall(n) (now + off[n])
#define cwall(c) (now + coff(c))
#define LIVE(n) (owner[n] != 0 && nwall(n) < kexp[n])
#define CN(c, n) ((c) * N + (n))
#define MAX(a, b) ((a) > (b) -> (a) : (b))

int now = S0;

/* nodes */
bool up[N];
byte owner[N];  /* token in the lock key, 0 = no key */
int kexp[N];    /* node wall time at which the key expires (PX ttl) */
int fence[N];   /* the fence key, 0 = missing */
int off[N];     /* node wall clock - real time */
int started[N]; /* node wall time at its start: INFO uptime = nwall - started */
byte runid[N];
int restartAt[N]; /* real time of the latest restart */
byte runs = N;
byte crashes;
byte steps;

/* clients: what node-health.ts keeps per node */
byte known[C * N];  /* run_id last seen, 0 = never (first contact) */
int qUntil[C * N];  /* quarantine end, on the client's monotonic clock */
int last[C];        /* fence-clock.ts: highest value proposed or observed */

/* holds */
bool holding[C];
int validUntil[C];
int myFence[C];
byte myTok[C];
byte toks;
int lastGrantFence;  /* the fence of the latest grant */
int maxGrantFence;   /* the highest fence granted so far */

/* node-health.ts #quarantineFor: the client reads INFO (run_id, uptime, server time). */
inline verify(c, n) {
  if
  :: known[CN(c, n)] != runid[n] ->
     if
     :: QMODE == 0 -> skip
     :: QMODE == 1 ->
        /* old: maxTtl - uptime, whether restarted or first contact */
        q = TTL - (nwall(n) - started[n]);
        if
        :: q > 0 -> qUntil[CN(c, n)] = now + q
        :: else -> skip
        fi
     :: QMODE >= 2 && known[CN(c, n)] != 0 ->
        /* a run_id we did not see before: maxTtl from when we read it, on our monotonic
         * clock; the earliest that can be is the restart itself (a reconnect at once) */
        qUntil[CN(c, n)] = MAX(qUntil[CN(c, n)], restartAt[n] + TTL)
     :: QMODE == 3 && known[CN(c, n)] == 0 ->
        qUntil[CN(c, n)] = MAX(qUntil[CN(c, n)], now + TTL)
     :: QMODE == 2 && known[CN(c, n)] == 0 ->
        /* first contact: uptime only if the node's clock agrees with ours within TOL */
        if
        :: nwall(n) - cwall(c) > TOL || cwall(c) - nwall(n) > TOL ->
           qUntil[CN(c, n)] = MAX(qUntil[CN(c, n)], now + TTL)
        :: else ->
           q = TTL - (nwall(n) - started[n]) + TOL;
           if
           :: q > TTL -> q = TTL
           :: else -> skip
           fi;
           if
           :: q > 0 -> qUntil[CN(c, n)] = MAX(qUntil[CN(c, n)], now + q)
           :: else -> skip
           fi
        fi
     fi;
     known[CN(c, n)] = runid[n]
  :: else -> skip
  fi
}

#define MAYVOTE(c, n) (QMODE == 0 || now >= qUntil[CN(c, n)])

/* Redis expires a key when its wall clock passes the key's expiry. */
inline expire(n) {
  if
  :: owner[n] != 0 && nwall(n) >= kexp[n] -> owner[n] = 0
  :: else -> skip
  fi
}

/* Mutual exclusion: when c starts (or extends) a hold, no other client is within its validity. */
inline checkExclusive(c, t) {
  assert((CHECK & 1) == 0 || !(holding[1 - c] && t < validUntil[1 - c]))
}

/* acquire.lua / acquire-one.lua on node n: SET NX PX, then the fence with SET ... GET; a
 * hand-over (prev != 0) replaces prev's key. Reply: 1 granted, 2 fenced, 0 held. */
inline acquireScript(n, tok, prev, prop, reply) {
  expire(n);
  if
  :: owner[n] == 0 || (prev != 0 && owner[n] == prev) ->
     if
     :: fence[n] >= prop -> reply = 2   /* undone: the old fence and key stay */
     :: else ->
        owner[n] = tok;
        kexp[n] = nwall(n) + TTL;
        fence[n] = prop;
        reply = 1
     fi
  :: else -> reply = 0
  fi
}

/* release.lua: compare-and-delete. */
inline releaseOn(n, tok) {
  if
  :: up[n] ->
     if
     :: owner[n] == tok -> owner[n] = 0
     :: else -> skip
     fi
  :: else -> skip
  fi
}

/* Releases are never lost here: a lost release leaves a key that only blocks others until its
 * TTL, which cannot make a double grant or a lower fence possible (README: abstractions). */
inline releaseEverywhere(tok) {
  n = 0;
  do
  :: n < N -> releaseOn(n, tok); n++
  :: else -> break
  od
}

active proctype Time() {
end:
  do
  :: atomic { now < TMAX -> now++ }
  od
}

/* Crashes (then restarts, with or without the data) and wall-clock steps on nodes. */
active proctype Faults() {
  byte n;
end:
  do
  :: atomic {
       /* node 0: the nodes start alike, so one crash is a crash of node 0 up to renaming */
       crashes < CRASHES && up[0];
       n = 0;
       up[n] = 0;
       crashes++;
       printf("EVENT t=%d node %d crashes\n", now, n);
       n = 0
     }
  :: atomic {
       !up[0];
       n = 0;
       up[n] = 1;
       runs++;
       runid[n] = runs;
       restartAt[n] = now;
       if
       :: BEHIND -> off[n] = -STEP
       :: else -> skip
       fi;
       started[n] = nwall(n);
       if
       :: EMPTY -> owner[n] = 0; fence[n] = 0
       :: else -> skip
       fi;
       printf("EVENT t=%d node %d restarts (run %d, empty=%d), its clock %d off\n", now, n, runs, EMPTY, off[n]);
       n = 0
     }
  :: atomic {
       /* on node 0, the node that crashes (STEPLIVE: any time) */
       steps < STEPS && (STEPLIVE || !LIVE(0));
       n = 0;
       off[n] = off[n] + STEP;
       steps++;
       printf("EVENT t=%d node %d wall clock steps forward by %d (now %d off)\n", now, n, STEP, off[n]);
       n = 0
     }
  od
}

/*
 * node-ops.ts attemptAcquire, as one step at the attempt's start: one token and one proposal
 * for every node; each request reaches its node or is lost, each reply reaches the client or
 * is lost. A request waits for the node's check (node-link.ts), and a node that may not vote
 * gets nothing; a request may be sent up to NT (nodeTimeoutMs) after the start and still count,
 * so the vote gate is checked at start + NT (it lets through everything the code lets through;
 * the decision then comes NT after the start). The validity is start + ttl either way.
 */
inline attempt(c) {
  attempts++;
  toks++;
  tok = toks;
  prop = MAX(cwall(c), last[c] + 1);
  last[c] = prop;
  heard = 0;
  grants = 0;
  printf("EVENT t=%d client %d tries, proposal %d, hand-over from token %d\n", now, c, prop, prev);
  n = 0;
  do
  :: n < N ->
     if
     :: up[n] ->
        if
        :: known[CN(c, n)] != runid[n] -> verify(c, n)
        :: else -> skip
        fi;
        if
        :: QMODE == 0 || now + NT >= qUntil[CN(c, n)] ->
           if
           :: QMODE != 0 && now < qUntil[CN(c, n)] -> late = 1   /* sent after the quarantine ended */
           :: else -> skip
           fi;
           if
           :: LOSS -> skip   /* the request is lost */
           :: true ->
              acquireScript(n, tok, prev, prop, reply);
              if
              :: reply == 1 -> grants = grants | (1 << n)
              :: else -> skip
              fi;
              if
              :: LOSS -> skip   /* the reply is lost */
              :: true ->
                 if
                 :: reply == 1 -> heard++
                 :: reply == 2 -> last[c] = MAX(last[c], fence[n])  /* observe the stored fence */
                 :: else -> skip
                 fi
              fi
           fi
        :: else -> skip
        fi
     :: else -> skip
     fi;
     n++
  :: else -> break
  od;
  if
  :: heard >= Q ->
     /* decided once the last counted vote came: NT later if one was sent late */
     checkExclusive(c, now + late * NT);
     /* fence order: every holder's fence above the previous holder's */
     assert((CHECK & 2) == 0 || prop > lastGrantFence);
     /* the fenced resource (it keeps the highest fence it accepted, and holders may write at
      * any time, also long after their validity): an earlier holder's stale write is accepted
      * after ours exactly when its fence is above ours */
     assert((CHECK & 4) == 0 || prop >= maxGrantFence);
     lastGrantFence = prop;
     maxGrantFence = MAX(maxGrantFence, prop);
     holding[c] = 1;
     validUntil[c] = now + TTL;
     myFence[c] = prop;
     myTok[c] = tok;
     printf("EVENT t=%d client %d GRANTED fence %d, valid until t=%d (granted by nodes %d)\n", now, c, prop, now + TTL, grants)
  :: else ->
     printf("EVENT t=%d client %d refused (%d votes heard, granted by nodes %d)\n", now, c, heard, grants);
     /* partial grants are released; a hand-over that failed releases the old token too */
     releaseEverywhere(tok);
     if
     :: prev != 0 -> releaseEverywhere(prev)
     :: else -> skip
     fi
  fi;
  /* forget the attempt's locals: equal states compare equal */
  n = 0; tok = 0; prev = 0; grants = 0; heard = 0; reply = 0; prop = 0; q = 0; late = 0
}

proctype Client(byte c) {
  byte n;
  byte tok;
  byte prev;
  byte grants;  /* bit per node: it granted (the client may not have heard) */
  byte heard;   /* granted votes that reached the client */
  byte reply;
  bool late;
  byte attempts;
  byte extensions;
  int prop;
  int q;
end:
  do
  /* a client connects to a node it never saw and reads INFO (first contact) */
  :: atomic {
       FIRST && c == 1;
       if
       :: up[0] && known[CN(c, 0)] == 0 -> n = 0
       :: up[1] && known[CN(c, 1)] == 0 -> n = 1
       :: up[2] && known[CN(c, 2)] == 0 -> n = 2
       fi;
       verify(c, n);
       n = 0; q = 0
     }
  /* an acquire attempt, or a hand-over from our own hold to a local waiter */
  :: atomic {
       attempts < (c == 0 -> ATT0 : ATT1) && !holding[c] -> prev = 0; attempt(c)
     }
  :: atomic {
       HANDOVER && attempts < (c == 0 -> ATT0 : ATT1) && holding[c] ->
       /* the old holder released: its hold ends here, the waiter's attempt carries prev */
       holding[c] = 0; prev = myTok[c]; attempt(c)
     }
  :: atomic {
       holding[c] -> holding[c] = 0;
       printf("EVENT t=%d client %d releases fence %d\n", now, c, myFence[c]);
       releaseEverywhere(myTok[c])
     }
  /* extendAll + extend.lua, at one instant */
  :: atomic {
       extensions < EXTEND && holding[c] && now < validUntil[c] ->
       extensions++;
       heard = 0;
       n = 0;
       do
       :: n < N ->
          if
          :: up[n] && MAYVOTE(c, n) ->
             if
             :: known[CN(c, n)] != runid[n] -> verify(c, n)
             :: else -> skip
             fi
          :: else -> skip
          fi;
          if
          :: up[n] && MAYVOTE(c, n) && known[CN(c, n)] == runid[n] ->
             expire(n);
             if
             :: owner[n] == myTok[c] -> kexp[n] = nwall(n) + TTL; reply = 1
             :: owner[n] == 0 && fence[n] <= myFence[c] ->
                owner[n] = myTok[c]; kexp[n] = nwall(n) + TTL; fence[n] = myFence[c]; reply = 1
             :: else -> reply = 0
             fi;
             if
             :: reply == 1 -> heard++
             :: else -> skip
             fi
          :: LOSS -> skip
          :: else -> skip
          fi;
          n++
       :: else -> break
       od;
       if
       :: heard >= Q ->
          checkExclusive(c, now);
          validUntil[c] = now + TTL;
          printf("EVENT t=%d client %d extends fence %d on %d nodes\n", now, c, myFence[c], heard)
       :: else -> skip
       fi;
       n = 0; heard = 0; reply = 0; q = 0
     }
  od
}

init {
  atomic {
    byte i;
    for (i : 0 .. N - 1) {
      up[i] = 1;
      runid[i] = i + 1;
      /* the clients have known the nodes for a while, except a new client 1 with FIRST */
      known[CN(0, i)] = i + 1;
      if
      :: !FIRST -> known[CN(1, i)] = i + 1
      :: else -> skip
      fi
    }
    run Client(0);
    run Client(1)
  }
}
