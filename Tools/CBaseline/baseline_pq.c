// The raw libpq C baseline for the PostgreSQL benchmarks: the same SQL work as the Swift layer's
// PostgreSQL engine, written by hand with libpq and server-side prepared statements. See
// Tools/README.md.
#include "baseline.h"

#include <postgresql/libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// Server notices ("database ... does not exist, skipping") are not results: dropped, as the
// Swift engine drops them.
static void ignore_notice(void *context, const char *message) {
  (void)context;
  (void)message;
}

void *tbpq_open(const char *conninfo) {
  PGconn *db = PQconnectdb(conninfo);
  if (PQstatus(db) != CONNECTION_OK) {
    fprintf(stderr, "tbpq_open: %s", PQerrorMessage(db));
    PQfinish(db);
    return NULL;
  }
  PQsetNoticeProcessor(db, ignore_notice, NULL);
  PGresult *result = PQexec(db, "SET extra_float_digits TO 3");
  PQclear(result);
  return db;
}

void tbpq_close(void *db) { PQfinish((PGconn *)db); }

int tbpq_exec(void *db, const char *sql) {
  PGresult *result = PQexec((PGconn *)db, sql);
  ExecStatusType status = PQresultStatus(result);
  int ok = status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
  if (!ok) fprintf(stderr, "tbpq_exec: %s", PQresultErrorMessage(result));
  PQclear(result);
  return ok ? 0 : 1;
}

static double now_reference_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9 - 978307200.0;
}

static uint64_t big_endian(uint64_t value) { return __builtin_bswap64(value); }

/// Runs a prepared statement; the result when it succeeded, else NULL (cleared).
static PGresult *run(PGconn *db, const char *name, int count, const char *const *values,
                     const int *lengths, const int *formats) {
  PGresult *result = PQexecPrepared(db, name, count, values, lengths, formats, 0);
  ExecStatusType status = PQresultStatus(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
    fprintf(stderr, "tbpq: %s", PQresultErrorMessage(result));
    PQclear(result);
    return NULL;
  }
  return result;
}

/* Rows a save sends in one pipeline, as the Swift engine's (`Connection.batchLimit`). */
#define TB_BATCH 128

/* Sends a sync and reads a pipeline's answers up to it: `count` statements'. With `keys`, each
   one's first column as an integer (text form); with `found`, whether any returned a row.
   0 when every statement succeeded. */
static int pipeline_answers(PGconn *db, size_t count, uint64_t *keys, int *found) {
  if (!PQpipelineSync(db)) return 1;
  int ok = 1;
  size_t answered = 0;
  for (;;) {
    PGresult *result = PQgetResult(db);
    if (!result) {
      if (PQstatus(db) == CONNECTION_BAD) return 1;
      continue; /* the end of one statement's answer */
    }
    ExecStatusType status = PQresultStatus(result);
    if (status == PGRES_PIPELINE_SYNC) {
      PQclear(result);
      break;
    }
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
      int rows = PQntuples(result);
      if (found && rows > 0) *found = 1;
      if (keys && answered < count)
        keys[answered] = rows > 0 ? (uint64_t)strtoll(PQgetvalue(result, 0, 0), NULL, 10) : 0;
    } else {
      if (ok) fprintf(stderr, "tbpq: %s", PQresultErrorMessage(result));
      ok = 0;
    }
    answered++;
    PQclear(result);
  }
  return ok && answered == count ? 0 : 1;
}

static int prepare(PGconn *db, const char *name, const char *sql, int count, const Oid *types) {
  PGresult *result = PQprepare(db, name, sql, count, types);
  int ok = PQresultStatus(result) == PGRES_COMMAND_OK;
  if (!ok) fprintf(stderr, "tbpq prepare: %s", PQresultErrorMessage(result));
  PQclear(result);
  return ok ? 0 : 1;
}

int tbpq_insert(void *handle, const tb_trip *trips, size_t count, const char *author) {
  PGconn *db = handle;
  static const Oid transaction_types[] = {0, 701};
  static const Oid lookup_types[] = {17};
  static const Oid insert_types[] = {17, 0, 0, 701, 701, 701, 701, 17};
  static const Oid change_types[] = {20, 0, 20, 20, 0};
  /* Prepared once per connection (a fresh connection per insert run). */
  if (prepare(db, "t", "INSERT INTO _history_transactions (author, timestamp) VALUES ($1, $2) RETURNING token", 2, transaction_types) ||
      prepare(db, "l", "SELECT \"_pk\" FROM \"trips\" WHERE \"id\" = $1", 1, lookup_types) ||
      prepare(db, "i",
              "INSERT INTO \"trips\" (\"id\", \"name\", \"destination\", \"start_date\", \"end_date\", "
              "\"latitude\", \"longitude\", \"place_id\") VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING \"_pk\"",
              8, insert_types) ||
      prepare(db, "c", "INSERT INTO _history_changes (token, entity, pk, kind, attributes) VALUES ($1, $2, $3, $4, $5)",
              5, change_types))
    return 1;
  if (tbpq_exec(db, "BEGIN ISOLATION LEVEL READ COMMITTED") ||
      tbpq_exec(db, "SELECT pg_advisory_xact_lock(1414680659)"))
    return 1;
  uint64_t when = 0;
  double now = now_reference_seconds();
  memcpy(&when, &now, 8);
  when = big_endian(when);
  const char *transaction_values[] = {author, (const char *)&when};
  const int transaction_lengths[] = {0, 8}, transaction_formats[] = {0, 1};
  PGresult *result = run(db, "t", 2, transaction_values, transaction_lengths, transaction_formats);
  if (!result) goto fail;
  uint64_t token = big_endian((uint64_t)strtoll(PQgetvalue(result, 0, 0), NULL, 10));
  PQclear(result);
  /* In batches, as the Swift engine saves: each batch's lookups, then its inserts, then its
     history rows, each sent whole in libpq's pipeline mode and answered in one round trip. */
  static char places[TB_BATCH][256];
  uint64_t keys[TB_BATCH], doubles[TB_BATCH][4];
  const int lookup_lengths[] = {16}, binary[] = {1};
  const int insert_formats[] = {1, 0, 0, 1, 1, 1, 1, 1};
  const int change_lengths[] = {8, 0, 8, 8, 0}, change_formats[] = {1, 0, 1, 1, 0};
  const uint64_t kind = 0;
  for (size_t start = 0; start < count; start += TB_BATCH) {
    size_t n = count - start < TB_BATCH ? count - start : TB_BATCH;
    if (PQenterPipelineMode(db) != 1) goto fail;
    for (size_t i = 0; i < n; i++) {
      const char *lookup_values[] = {(const char *)trips[start + i].id};
      if (!PQsendQueryPrepared(db, "l", 1, lookup_values, lookup_lengths, binary, 0)) goto fail;
    }
    int found = 0;
    if (pipeline_answers(db, n, NULL, &found) || found) goto fail; /* upserts are not benchmarked */
    for (size_t i = 0; i < n; i++) {
      const tb_trip *trip = &trips[start + i];
      double source[4] = {trip->start_date, trip->end_date, trip->latitude, trip->longitude};
      for (int d = 0; d < 4; d++) {
        memcpy(&doubles[i][d], &source[d], 8);
        doubles[i][d] = big_endian(doubles[i][d]);
      }
      int place_length = 0;
      if (trip->place_id)
        place_length = snprintf(places[i], sizeof places[i], "{\"rawValue\":\"%s\"}", trip->place_id);
      const char *insert_values[] = {(const char *)trip->id, trip->name, trip->destination,
                                     (const char *)&doubles[i][0], (const char *)&doubles[i][1],
                                     (const char *)&doubles[i][2], (const char *)&doubles[i][3],
                                     trip->place_id ? places[i] : NULL};
      const int insert_lengths[] = {16, 0, 0, 8, 8, 8, 8, place_length};
      if (!PQsendQueryPrepared(db, "i", 8, insert_values, insert_lengths, insert_formats, 0)) goto fail;
    }
    if (pipeline_answers(db, n, keys, NULL)) goto fail;
    for (size_t i = 0; i < n; i++) {
      uint64_t pk = big_endian(keys[i]);
      const char *change_values[] = {(const char *)&token, "trips", (const char *)&pk,
                                     (const char *)&kind, NULL};
      if (!PQsendQueryPrepared(db, "c", 5, change_values, change_lengths, change_formats, 0)) goto fail;
    }
    if (pipeline_answers(db, n, NULL, NULL)) goto fail;
    if (PQexitPipelineMode(db) != 1) goto fail;
  }
  if (tbpq_exec(db, "NOTIFY \"_persistence_changes\"") || tbpq_exec(db, "COMMIT")) goto fail;
  return 0;
fail:
  if (PQpipelineStatus(db) != PQ_PIPELINE_OFF) {
    /* What is left of the pipeline, read up to a sync of its own, then out of it. */
    if (PQpipelineSync(db)) {
      for (;;) {
        PGresult *left = PQgetResult(db);
        if (!left) {
          if (PQstatus(db) == CONNECTION_BAD) break;
          continue;
        }
        int synced = PQresultStatus(left) == PGRES_PIPELINE_SYNC;
        PQclear(left);
        if (synced) break;
      }
    }
    PQexitPipelineMode(db);
  }
  tbpq_exec(db, "ROLLBACK");
  return 1;
}

static unsigned char nibble(char digit) {
  if (digit >= '0' && digit <= '9') return (unsigned char)(digit - '0');
  if (digit >= 'a' && digit <= 'f') return (unsigned char)(digit - 'a' + 10);
  return (unsigned char)(digit - 'A' + 10);
}

/// bytea's text form (\x and two hex digits a byte) into `target` (at most `capacity`
/// bytes); the byte count.
static size_t unhex(const char *text, unsigned char *target, size_t capacity) {
  size_t n = 0;
  if (text[0] != '\\' || text[1] != 'x') return 0;
  for (const char *p = text + 2; p[0] && p[1] && n < capacity; p += 2)
    target[n++] = (unsigned char)(nibble(p[0]) << 4 | nibble(p[1]));
  return n;
}

static char *copy(const char *text, int length) {
  char *result = malloc((size_t)length + 1);
  memcpy(result, text, (size_t)length);
  result[length] = 0;
  return result;
}

/* The statements tbpq_fetch and tbpq_count prepared on the (one) connection, by SQL: as the
   Swift layer, each query is prepared on the server once and run many times. */
static struct {
  PGconn *db;
  char *sql[32];
  int count;
} prepared;

/// Runs `sql` with at most one text parameter as a prepared statement of the connection.
static PGresult *run_prepared(PGconn *db, const char *sql, const char *text_parameter) {
  if (prepared.db != db) {
    for (int i = 0; i < prepared.count; i++) free(prepared.sql[i]);
    prepared.count = 0;
    prepared.db = db;
  }
  int index = -1;
  for (int i = 0; i < prepared.count; i++)
    if (strcmp(prepared.sql[i], sql) == 0) index = i;
  char name[16];
  if (index < 0) {
    if (prepared.count == 32) return NULL;
    index = prepared.count;
    snprintf(name, sizeof name, "q%d", index);
    if (prepare(db, name, sql, text_parameter ? 1 : 0, NULL)) return NULL;
    prepared.sql[prepared.count++] = strdup(sql);
  }
  snprintf(name, sizeof name, "q%d", index);
  const char *values[] = {text_parameter};
  return run(db, name, text_parameter ? 1 : 0, values, NULL, NULL);
}

int tbpq_fetch(void *handle, const char *where_sql, const char *text_parameter,
               const char *order_by, int section_column, tb_trips *out) {
  PGconn *db = handle;
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT \"_pk\", \"id\", \"name\", \"destination\", \"start_date\", \"end_date\", "
           "\"latitude\", \"longitude\", \"place_id\" FROM \"trips\"%s%s ORDER BY %s",
           where_sql ? " WHERE " : "", where_sql ? where_sql : "", order_by);
  PGresult *result = run_prepared(db, sql, text_parameter);
  if (!result) return 1;
  memset(out, 0, sizeof *out);
  int rows = PQntuples(result);
  out->capacity = rows ? (size_t)rows : 1;
  out->trips = malloc(out->capacity * sizeof(tb_trip));
  const char *previous_section = NULL;
  for (int row = 0; row < rows; row++) {
    tb_trip *trip = &out->trips[out->count++];
    unhex(PQgetvalue(result, row, 1), trip->id, 16);
    trip->name = copy(PQgetvalue(result, row, 2), PQgetlength(result, row, 2));
    trip->destination = copy(PQgetvalue(result, row, 3), PQgetlength(result, row, 3));
    trip->start_date = strtod(PQgetvalue(result, row, 4), NULL);
    trip->end_date = strtod(PQgetvalue(result, row, 5), NULL);
    trip->latitude = strtod(PQgetvalue(result, row, 6), NULL);
    trip->longitude = strtod(PQgetvalue(result, row, 7), NULL);
    /* The place id's JSON stays raw bytes, as a C program would keep it. */
    if (PQgetisnull(result, row, 8)) {
      trip->place_id = NULL;
    } else {
      const char *hex = PQgetvalue(result, row, 8);
      size_t length = (size_t)PQgetlength(result, row, 8) / 2;
      trip->place_id = malloc(length + 1);
      trip->place_id[unhex(hex, (unsigned char *)trip->place_id, length)] = 0;
    }
    if (section_column) {
      if (!previous_section || strcmp(previous_section, trip->destination) != 0) out->sections++;
      previous_section = trip->destination;
    }
  }
  PQclear(result);
  return 0;
}

long tbpq_count(void *handle, const char *where_sql, const char *text_parameter) {
  char sql[512];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM (SELECT 1 FROM \"trips\" WHERE %s) AS counted", where_sql);
  PGresult *result = run_prepared((PGconn *)handle, sql, text_parameter);
  if (!result) return -1;
  long count = strtol(PQgetvalue(result, 0, 0), NULL, 10);
  PQclear(result);
  return count;
}

const char *tbpq_server_version(void *handle) {
  return PQparameterStatus((PGconn *)handle, "server_version");
}
