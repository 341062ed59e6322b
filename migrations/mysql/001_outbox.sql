-- outboxd demo schema for MySQL 8 / MariaDB 10.11: the seeds' order flow and outbox table.
--
--   mariadb -h 127.0.0.1 -P 33306 -u outboxd_admin -p shop < migrations/mysql/001_outbox.sql
--
-- Idempotent (IF NOT EXISTS). The business rows and the outbox row are written in one local
-- transaction (see the seeds' CreateOrderWithOutbox); outboxd picks the outbox INSERT out
-- of the ROW binlog and routes it to Kafka like Debezium's Outbox Event Router.

CREATE TABLE IF NOT EXISTS orders (
    id          BIGINT AUTO_INCREMENT PRIMARY KEY,
    customer_id BIGINT      NOT NULL,
    status      VARCHAR(32) NOT NULL,
    total_cents BIGINT      NOT NULL DEFAULT 0,
    created_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at  DATETIME(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
        ON UPDATE CURRENT_TIMESTAMP(6)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS order_items (
    id          BIGINT AUTO_INCREMENT PRIMARY KEY,
    order_id    BIGINT      NOT NULL,
    sku         VARCHAR(64) NOT NULL,
    qty         INT         NOT NULL,
    price_cents BIGINT      NOT NULL,
    CONSTRAINT fk_order_items_order FOREIGN KEY (order_id) REFERENCES orders (id)
) ENGINE=InnoDB;

-- The outbox. Columns the router reads by default (Debezium EventRouter names in brackets):
--   id             event id, the `id` header          [table.field.event.id]
--   aggregate_type topic: outbox.event.<value>         [route.by.field]
--   aggregate_id   Kafka record key                    [table.field.event.key]
--   event_type     event type                          [table.field.event.type]
--   payload        Kafka record value, as written      [table.field.event.payload]
--   created_at     event timestamp                     [table.field.event.timestamp]
-- The rest is the seeds' polling-worker bookkeeping (status, attempts, locks, ...); a CDC
-- relay ignores it but it does no harm, and it keeps the seeds' worker code runnable.
-- Deviations from the seed, on purpose:
--   * id is a UUID string (the seed's BIGINT AUTO_INCREMENT is not a globally unique event
--     id); the application may set it, else the server generates one.
--   * aggregate_id is a string (Kafka keys are bytes; a numeric id still fits).
--   * payload and idempotency_key are NULLable: a NULL payload is how a Debezium-style
--     outbox asks for a tombstone (route.tombstone.on.empty.payload); the unique key still
--     stops duplicates whenever the application sets idempotency_key.
CREATE TABLE IF NOT EXISTS outbox_events (
    id              CHAR(36)     NOT NULL DEFAULT (UUID()),

    aggregate_type  VARCHAR(64)  NOT NULL,
    aggregate_id    VARCHAR(255) NOT NULL,
    event_type      VARCHAR(128) NOT NULL,

    payload         JSON         NULL,

    status          ENUM('PENDING', 'PROCESSING', 'PUBLISHED', 'FAILED')
                        NOT NULL DEFAULT 'PENDING',
    attempts        INT          NOT NULL DEFAULT 0,
    locked_by       VARCHAR(128) NULL,
    locked_until    DATETIME(6)  NULL,
    last_error      TEXT         NULL,
    published_at    DATETIME(6)  NULL,

    -- idempotency key, so the same business event is not recorded twice
    idempotency_key VARCHAR(255) NULL,

    created_at      DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    updated_at      DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
        ON UPDATE CURRENT_TIMESTAMP(6),

    PRIMARY KEY (id),
    UNIQUE KEY uq_outbox_idempotency_key (idempotency_key),
    KEY idx_outbox_fetch (status, created_at),
    KEY idx_outbox_lock (status, locked_until)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;
