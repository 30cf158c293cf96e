// The raw SQLite C baseline for the benchmarks: the same SQL work as the Swift layer, written
// by hand with prepared statements. See Tools/README.md.
#include "baseline.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>

void *tb_open(const char *path, int cache_kib) {
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
    sqlite3_close_v2(db);
    return NULL;
  }
  sqlite3_busy_timeout(db, 5000);
  char sql[128];
  snprintf(sql, sizeof sql, "PRAGMA cache_size = -%d; PRAGMA synchronous = NORMAL", cache_kib);
  sqlite3_exec(db, sql, NULL, NULL, NULL);
  return db;
}

void tb_close(void *db) { sqlite3_close_v2((sqlite3 *)db); }

int tb_checkpoint(void *db) {
  return sqlite3_wal_checkpoint_v2((sqlite3 *)db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
}

static double now_reference_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9 - 978307200.0;
}

int tb_insert(void *handle, const tb_trip *trips, size_t count, const char *author) {
  sqlite3 *db = handle;
  sqlite3_stmt *transaction = NULL, *lookup = NULL, *insert = NULL, *change = NULL;
  int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return rc;
  rc = sqlite3_prepare_v2(db, "INSERT INTO _history_transactions (author, timestamp) VALUES (?, ?)",
                          -1, &transaction, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(db, "SELECT \"_pk\" FROM \"trips\" WHERE \"id\" = ?", -1, &lookup, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(db,
                            "INSERT INTO \"trips\" (\"id\", \"name\", \"destination\", \"start_date\", "
                            "\"end_date\", \"latitude\", \"longitude\", \"place_id\") "
                            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                            -1, &insert, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(db,
                            "INSERT INTO _history_changes (token, entity, pk, kind, attributes) "
                            "VALUES (?, ?, ?, ?, ?)",
                            -1, &change, NULL);
  if (rc != SQLITE_OK) goto done;
  sqlite3_bind_text(transaction, 1, author, -1, SQLITE_STATIC);
  sqlite3_bind_double(transaction, 2, now_reference_seconds());
  if ((rc = sqlite3_step(transaction)) != SQLITE_DONE) goto done;
  sqlite3_int64 token = sqlite3_last_insert_rowid(db);
  char place[256];
  for (size_t i = 0; i < count; i++) {
    const tb_trip *trip = &trips[i];
    sqlite3_bind_blob(lookup, 1, trip->id, 16, SQLITE_STATIC);
    rc = sqlite3_step(lookup);
    sqlite3_reset(lookup);
    if (rc == SQLITE_ROW) { rc = SQLITE_CONSTRAINT; goto done; } /* upserts are not benchmarked */
    sqlite3_bind_blob(insert, 1, trip->id, 16, SQLITE_STATIC);
    sqlite3_bind_text(insert, 2, trip->name, -1, SQLITE_STATIC);
    sqlite3_bind_text(insert, 3, trip->destination, -1, SQLITE_STATIC);
    sqlite3_bind_double(insert, 4, trip->start_date);
    sqlite3_bind_double(insert, 5, trip->end_date);
    sqlite3_bind_double(insert, 6, trip->latitude);
    sqlite3_bind_double(insert, 7, trip->longitude);
    if (trip->place_id) {
      int length = snprintf(place, sizeof place, "{\"rawValue\":\"%s\"}", trip->place_id);
      sqlite3_bind_blob(insert, 8, place, length, SQLITE_TRANSIENT);
    } else {
      sqlite3_bind_null(insert, 8);
    }
    if ((rc = sqlite3_step(insert)) != SQLITE_DONE) goto done;
    sqlite3_reset(insert);
    sqlite3_int64 pk = sqlite3_last_insert_rowid(db);
    sqlite3_bind_int64(change, 1, token);
    sqlite3_bind_text(change, 2, "trips", -1, SQLITE_STATIC);
    sqlite3_bind_int64(change, 3, pk);
    sqlite3_bind_int64(change, 4, 0);
    sqlite3_bind_null(change, 5);
    if ((rc = sqlite3_step(change)) != SQLITE_DONE) goto done;
    sqlite3_reset(change);
  }
  rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
done:
  if (rc != SQLITE_OK && rc != SQLITE_DONE) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  sqlite3_finalize(transaction);
  sqlite3_finalize(lookup);
  sqlite3_finalize(insert);
  sqlite3_finalize(change);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static char *copy_text(sqlite3_stmt *statement, int column) {
  int length = sqlite3_column_bytes(statement, column);
  const unsigned char *text = sqlite3_column_text(statement, column);
  char *copy = malloc((size_t)length + 1);
  memcpy(copy, text, (size_t)length);
  copy[length] = 0;
  return copy;
}

int tb_fetch(void *handle, const char *where_sql, const char *text_parameter, const char *order_by,
             int section_column, tb_trips *out) {
  sqlite3 *db = handle;
  char sql[512];
  snprintf(sql, sizeof sql,
           "SELECT \"_pk\", \"id\", \"name\", \"destination\", \"start_date\", \"end_date\", "
           "\"latitude\", \"longitude\", \"place_id\" FROM \"trips\"%s%s ORDER BY %s",
           where_sql ? " WHERE " : "", where_sql ? where_sql : "", order_by);
  sqlite3_stmt *statement = NULL;
  int rc = sqlite3_prepare_v2(db, sql, -1, &statement, NULL);
  if (rc != SQLITE_OK) return rc;
  if (text_parameter) sqlite3_bind_text(statement, 1, text_parameter, -1, SQLITE_STATIC);
  memset(out, 0, sizeof *out);
  const char *previous_section = NULL;
  while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
    if (out->count == out->capacity) {
      out->capacity = out->capacity ? out->capacity * 2 : 1024;
      out->trips = realloc(out->trips, out->capacity * sizeof(tb_trip));
    }
    tb_trip *trip = &out->trips[out->count++];
    const void *id = sqlite3_column_blob(statement, 1);
    if (id && sqlite3_column_bytes(statement, 1) == 16) memcpy(trip->id, id, 16);
    trip->name = copy_text(statement, 2);
    trip->destination = copy_text(statement, 3);
    trip->start_date = sqlite3_column_double(statement, 4);
    trip->end_date = sqlite3_column_double(statement, 5);
    trip->latitude = sqlite3_column_double(statement, 6);
    trip->longitude = sqlite3_column_double(statement, 7);
    /* The place id's JSON stays raw bytes, as a C program would keep it. */
    trip->place_id = sqlite3_column_type(statement, 8) == SQLITE_NULL ? NULL : copy_text(statement, 8);
    if (section_column) {
      if (!previous_section || strcmp(previous_section, trip->destination) != 0) out->sections++;
      previous_section = trip->destination;
    }
  }
  sqlite3_finalize(statement);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

long tb_count(void *handle, const char *where_sql, const char *text_parameter) {
  sqlite3 *db = handle;
  char sql[512];
  snprintf(sql, sizeof sql, "SELECT count(*) FROM (SELECT 1 FROM \"trips\" WHERE %s)", where_sql);
  sqlite3_stmt *statement = NULL;
  if (sqlite3_prepare_v2(db, sql, -1, &statement, NULL) != SQLITE_OK) return -1;
  sqlite3_bind_text(statement, 1, text_parameter, -1, SQLITE_STATIC);
  long result = sqlite3_step(statement) == SQLITE_ROW ? (long)sqlite3_column_int64(statement, 0) : -1;
  sqlite3_finalize(statement);
  return result;
}

static int compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int tb_bounds(void *handle, double *west, double *south, double *east, double *north, size_t *count) {
  sqlite3 *db = handle;
  sqlite3_stmt *statement = NULL;
  if (sqlite3_prepare_v2(db, "SELECT \"latitude\", \"longitude\" FROM \"trips\"", -1, &statement, NULL) != SQLITE_OK)
    return -1;
  size_t n = 0, capacity = 1024;
  double *longitudes = malloc(capacity * sizeof(double));
  double lo = 1e300, hi = -1e300;
  *count = 0;
  while (sqlite3_step(statement) == SQLITE_ROW) {
    double latitude = sqlite3_column_double(statement, 0);
    double longitude = sqlite3_column_double(statement, 1);
    (*count)++;
    if (latitude < lo) lo = latitude;
    if (latitude > hi) hi = latitude;
    if (latitude == 90 || latitude == -90) continue;
    double x = fmod(longitude, 360);
    if (x >= 180) x -= 360;
    if (x < -180) x += 360;
    if (n == capacity) longitudes = realloc(longitudes, (capacity *= 2) * sizeof(double));
    longitudes[n++] = x;
  }
  sqlite3_finalize(statement);
  if (*count == 0) { free(longitudes); return 1; }
  *south = lo;
  *north = hi;
  if (n == 0) { *west = -180; *east = 180; free(longitudes); return 0; }
  qsort(longitudes, n, sizeof(double), compare_doubles);
  double largest = longitudes[0] + 360 - longitudes[n - 1];
  double w = longitudes[0], e = longitudes[n - 1];
  for (size_t i = 0; i + 1 < n; i++) {
    double gap = longitudes[i + 1] - longitudes[i];
    if (gap > largest) { largest = gap; w = longitudes[i + 1]; e = longitudes[i]; }
  }
  if (e == -180 && w != e) e = 180;
  *west = w;
  *east = e;
  free(longitudes);
  return 0;
}

void tb_free_trips(tb_trips *trips) {
  for (size_t i = 0; i < trips->count; i++) {
    free(trips->trips[i].name);
    free(trips->trips[i].destination);
    free(trips->trips[i].place_id);
  }
  free(trips->trips);
  memset(trips, 0, sizeof *trips);
}

unsigned long long tb_checksum(const tb_trips *trips) {
  unsigned long long sum = 0;
  for (size_t i = 0; i < trips->count; i++) {
    const tb_trip *trip = &trips->trips[i];
    unsigned long long h = 1469598103934665603ULL;
    for (int b = 0; b < 16; b++) h = (h ^ trip->id[b]) * 1099511628211ULL;
    sum += h * (i + 1);
  }
  return sum;
}

const char *sqlite3_libversion_shim(void) { return sqlite3_libversion(); }

long long tb_sqlite_memory_used(void) { return (long long)sqlite3_memory_used(); }
