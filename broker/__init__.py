"""The broker: topics of segments stored as chains of ledgers, served over gRPC.

A **topic** is split into **segments** by key range; a segment is an ordered
chain of ledgers (Pulsar's managed ledger) that takes appends of whole blocks,
rolls over, seals, truncates and is recovered (fencing the previous writer)
when a broker loads it. Full transactions are decided by a coordinator that
logs to a system topic and writes commit/abort markers read through each
segment's ``txnbuffer``; single-routing-key transactions (PDP-44) are blocks
held per flow and written as one entry. Reader groups keep their state by
conditional update. It uses ``txnbuffer`` and ``ledger``; nothing below
imports it, and the SDK never does.

Layout, top to bottom (the import-linter contracts in ``pyproject.toml`` keep
it: each layer imports only the ones below it, with no ignores):

- ``app/``: the processes. ``standalone`` wires everything (metadata store,
  bookie or remote bookies, ledger client, topics, coordinator, groups,
  server, metrics, storage watch) and is the one place that knows every part;
  ``standalone_cli`` and ``broker_cli`` are the ``folio standalone`` and
  ``folio broker`` commands (``folio.commands`` entry points).
- ``standalone_config`` -> ``broker_config``: the processes' settings.
- ``services/``: thin gRPC servicers (decode, call the domain, encode), the
  ``server`` that registers them with health and reflection, and the checks
  every request passes first (``_handlers``: decodable; ``request_names``).
- ``txn/``: the ``coordinator`` of full transactions (``states``: the
  transition table), ``commit_keys`` (idempotent commits), ``faults``
  (crash-window hooks, injected by tests).
- ``appends/``: ``stream`` (one Append stream's flows, held blocks and failure
  replies: every append, plain or transactional, runs here) and ``held``
  (PDP-44 bounds).
- ``groups/``: reader-group ``store`` (conditional updates), member
  ``liveness``, ``backlog`` metrics.
- ``system/``: ``CompactedTopic`` (the broker's own keyed state: latest record
  per key, compaction) and the transaction buffers' ``snapshot_store``.
- ``topics/``: ``TopicManager`` and its parts (``loaded`` segments, the
  ``catalog`` of topic records, ``crud``, ``scale``, ``maintenance``),
  ``produce`` (unary writes: route, pack, append), the pure
  ``scaling`` plans, ``routing`` (the routing-key hash),
  ``internal`` (public calls never write system topics), ``records`` (the
  topic record).
- ``segments/``: ``LedgerSegment`` and its parts, the entry format
  (``entry``), ``block_limits``, ``offset_index``, ``reads``, ``retention``,
  ``recovery``, ``tailing`` (a Read stream: batches, tail waits), ``writers``
  (exactly-once numbering), ``records`` (the segment record) and ``names``.
- at the bottom: ``metrics``; ``status`` (errors -> gRPC status, as data) with
  ``clip``; ``api`` (the domain contracts) and ``errors``.

Where this differs from the layout first sketched (issue 14), and why:

- The order is ``txn | groups | appends -> system -> topics -> segments``, not
  ``topics -> segments -> system``: a compacted system topic is a topic of the
  ``TopicManager`` (it loads its segment through it), so ``system`` sits above
  ``topics``; the manager is handed the snapshot store's factory by the wiring
  instead of importing it (that import was the circle).
- ``names`` (topic and segment names, record paths) is in ``segments/``, not
  ``topics/``: a segment computes its own name and record path, and
  ``segments`` is the lowest layer. The JSON framing of every persisted
  record (``dump_record``, ``load_record``) is ``ledger.records``, the bottom
  layer every package may use; ``segments/records`` reads it with the broker's
  ``CorruptDataError``; the topic record is ``topics/records``.
- ``internal`` (the system-topic rule) is in ``topics/``, not ``system/``:
  ``TopicManager`` itself refuses public writes to system topics.
- ``entry`` and ``block_limits`` are in ``segments/``: the segment writes
  the entries and checks the blocks; ``services`` and ``system`` use them.
- The Append stream's engine is ``appends/stream``, not in ``txn/`` (where
  it first was): every plain append runs on it; it reaches the coordinator
  through its ``TxnWrites`` protocol, and the servicer must hold no logic.
- ``clip`` stays at the top, beside ``status``, which uses it for every
  message that leaves the broker.
- ``broker_config`` (``BrokerConfig``; ``remote_settings``: ``RemoteBookies``) and
  ``standalone_config`` (``StandaloneConfig``, which extends it) stay at the
  top with their names, layered just under ``app`` and above the domain:
  ``BrokerConfig`` gathers the components' defaults (``appends.held``,
  ``segments.writers``), and ``ledger.settings`` layers it.
- ``LedgerSegment`` holds parts that own their state, each tested alone, with
  their collaborators passed in (issue 26): the life cycle (``segments.life``),
  the ledger chain (``segments.chain``), the append pipeline
  (``segments.pipeline``), the transaction buffer (``segments.txns``), the
  long polls' wake-up (``segments.wakeup``) and the rollover
  (``segments.rollover`` with its ``gate``); ``appends``, ``markers``,
  ``reading``, ``head`` and ``lifecycle`` carry out the operations through
  them. It delegates once per call, under the names callers used before.
- ``TxnCoordinator`` holds parts that own their state, each tested alone,
  with their collaborators passed in (issue 26): the transaction table
  (``txn._table``), markers (``txn._markers``), background tasks
  (``txn._tasks``), the finisher (``txn._finish``, also the decision waiters),
  timeouts (``txn._timeouts``) and the replay (``txn._replay``). It delegates
  its public calls, whose names and signatures stayed.
- ``TopicManager`` holds parts that own their state, each tested alone, with
  their collaborators passed in (issue 26): the table of loaded segments
  (``topics.loaded``), the catalog of topic records with the per-topic locks
  (``topics.catalog``), CRUD (``topics.crud``), scaling (``topics.scale``) and
  the maintenance round (``topics.maintenance``). It owns only whether it is
  closed and delegates its public calls, whose names and signatures stayed.
"""

__all__: list[str] = []
