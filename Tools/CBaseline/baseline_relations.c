// The raw SQLite C baseline for the relationship benchmarks: owners, their items (to-many,
// ordered by position) and their stays (one-to-one), with the same SQL the Swift layer runs.
// See Tools/README.md.
#include "baseline.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  long long key;
  char *name;
  size_t first_item, item_count; /* a range of the items array */
  long long stay;                /* index into stays, or -1 */
} owner_row;

typedef struct {
  long long key;
  char *title;
  long long position;
  long long owner;
} item_row;

typedef struct {
  long long key;
  char *city;
  long long owner;
} stay_row;

static char *copy_text(sqlite3_stmt *statement, int column) {
  const unsigned char *text = sqlite3_column_text(statement, column);
  return strdup(text ? (const char *)text : "");
}

/// "[1,2,3]": the keys as one JSON text parameter, as the Swift layer binds a prefetch's keys.
static char *key_list(const owner_row *owners, size_t count) {
  size_t capacity = count * 21 + 3, length = 0;
  char *text = malloc(capacity);
  if (!text) return NULL;
  text[length++] = '[';
  for (size_t i = 0; i < count; i++) {
    length += (size_t)snprintf(text + length, capacity - length, i ? ",%lld" : "%lld", owners[i].key);
  }
  text[length++] = ']';
  text[length] = 0;
  return text;
}

int tb_rel_fetch(void *handle, int prefetch, unsigned long long *checksum) {
  sqlite3 *db = handle;
  sqlite3_stmt *statement = NULL;
  owner_row *owners = NULL;
  item_row *items = NULL;
  stay_row *stays = NULL;
  size_t owner_count = 0, owner_capacity = 1024, item_count = 0, item_capacity = 4096;
  size_t stay_count = 0, stay_capacity = 1024;
  char *keys = NULL;
  int rc = SQLITE_NOMEM;
  owners = malloc(owner_capacity * sizeof *owners);
  items = malloc(item_capacity * sizeof *items);
  stays = malloc(stay_capacity * sizeof *stays);
  if (!owners || !items || !stays) goto done;
  rc = sqlite3_prepare_v2(db, "SELECT \"_pk\", \"name\" FROM \"owners\" ORDER BY \"_pk\"", -1,
                          &statement, NULL);
  if (rc != SQLITE_OK) goto done;
  while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
    if (owner_count == owner_capacity) {
      owner_capacity *= 2;
      owner_row *grown = realloc(owners, owner_capacity * sizeof *owners);
      if (!grown) { rc = SQLITE_NOMEM; goto done; }
      owners = grown;
    }
    owners[owner_count++] =
        (owner_row){sqlite3_column_int64(statement, 0), copy_text(statement, 1), 0, 0, -1};
  }
  sqlite3_finalize(statement);
  statement = NULL;
  if (rc != SQLITE_DONE) goto done;
  /* Items: one query for all the owners (prefetch), or one per owner (each first access). */
  const char *all_items =
      "SELECT \"_pk\", \"title\", \"position\", \"owner\" FROM \"items\" WHERE \"owner\" IN "
      "(SELECT value FROM json_each(?)) ORDER BY \"owner\", \"position\", \"_pk\"";
  const char *owner_items =
      "SELECT \"_pk\", \"title\", \"position\", \"owner\" FROM \"items\" WHERE \"owner\" = ? "
      "ORDER BY \"position\", \"_pk\"";
  rc = sqlite3_prepare_v2(db, prefetch ? all_items : owner_items, -1, &statement, NULL);
  if (rc != SQLITE_OK) goto done;
  if (prefetch) {
    keys = key_list(owners, owner_count);
    if (!keys) { rc = SQLITE_NOMEM; goto done; }
    sqlite3_bind_text(statement, 1, keys, -1, SQLITE_STATIC);
  }
  size_t walk = 0;
  for (size_t o = 0; o < (prefetch ? 1 : owner_count); o++) {
    if (!prefetch) {
      sqlite3_reset(statement);
      sqlite3_bind_int64(statement, 1, owners[o].key);
      owners[o].first_item = item_count;
    }
    while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
      if (item_count == item_capacity) {
        item_capacity *= 2;
        item_row *grown = realloc(items, item_capacity * sizeof *items);
        if (!grown) { rc = SQLITE_NOMEM; goto done; }
        items = grown;
      }
      item_row row = {sqlite3_column_int64(statement, 0), copy_text(statement, 1),
                      sqlite3_column_int64(statement, 2), sqlite3_column_int64(statement, 3)};
      if (prefetch) {
        /* Rows come by owner, owners by key: a merge walk gives each owner its range. */
        while (walk < owner_count && owners[walk].key < row.owner) walk++;
        if (walk < owner_count && owners[walk].item_count == 0) owners[walk].first_item = item_count;
        if (walk < owner_count) owners[walk].item_count++;
      } else {
        owners[o].item_count++;
      }
      items[item_count++] = row;
    }
    if (rc != SQLITE_DONE) goto done;
  }
  sqlite3_finalize(statement);
  statement = NULL;
  if (prefetch) {
    rc = sqlite3_prepare_v2(db,
                            "SELECT \"_pk\", \"city\", \"owner\" FROM \"stays\" WHERE \"owner\" IN "
                            "(SELECT value FROM json_each(?)) ORDER BY \"owner\", \"_pk\"",
                            -1, &statement, NULL);
    if (rc != SQLITE_OK) goto done;
    sqlite3_bind_text(statement, 1, keys, -1, SQLITE_STATIC);
    walk = 0;
    while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
      if (stay_count == stay_capacity) {
        stay_capacity *= 2;
        stay_row *grown = realloc(stays, stay_capacity * sizeof *stays);
        if (!grown) { rc = SQLITE_NOMEM; goto done; }
        stays = grown;
      }
      stay_row row = {sqlite3_column_int64(statement, 0), copy_text(statement, 1),
                      sqlite3_column_int64(statement, 2)};
      while (walk < owner_count && owners[walk].key < row.owner) walk++;
      if (walk < owner_count) owners[walk].stay = (long long)stay_count;
      stays[stay_count++] = row;
    }
    if (rc != SQLITE_DONE) goto done;
  }
  rc = SQLITE_OK;
  unsigned long long sum = 0;
  for (size_t o = 0; o < owner_count; o++) {
    sum += (unsigned long long)(o + 1) * owners[o].item_count;
    for (size_t i = 0; i < owners[o].item_count; i++) {
      sum += (unsigned long long)items[owners[o].first_item + i].position * (i + 1);
    }
    if (owners[o].stay >= 0) sum += 7;
  }
  *checksum = sum;
done:
  sqlite3_finalize(statement);
  free(keys);
  for (size_t i = 0; i < owner_count; i++) free(owners[i].name);
  for (size_t i = 0; i < item_count; i++) free(items[i].title);
  for (size_t i = 0; i < stay_count; i++) free(stays[i].city);
  free(owners);
  free(items);
  free(stays);
  return rc == SQLITE_OK ? 0 : rc;
}

static double now_reference_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9 - 978307200.0;
}

/// Deletes rows of `table` whose "owner" is `owner`, each with its history change row, after
/// selecting their keys (the Swift layer's cascade does the same).
static int delete_children(sqlite3 *db, const char *table, long long owner, sqlite3_stmt *change,
                           sqlite3_int64 token) {
  char sql[160];
  sqlite3_stmt *select = NULL, *delete = NULL;
  snprintf(sql, sizeof sql, "SELECT \"_pk\" FROM \"%s\" WHERE \"owner\" = ?", table);
  int rc = sqlite3_prepare_v2(db, sql, -1, &select, NULL);
  snprintf(sql, sizeof sql, "DELETE FROM \"%s\" WHERE \"_pk\" = ?", table);
  if (rc == SQLITE_OK) rc = sqlite3_prepare_v2(db, sql, -1, &delete, NULL);
  if (rc != SQLITE_OK) goto done;
  sqlite3_bind_int64(select, 1, owner);
  size_t count = 0, capacity = 1024;
  long long *keys = malloc(capacity * sizeof *keys);
  if (!keys) { rc = SQLITE_NOMEM; goto done; }
  while ((rc = sqlite3_step(select)) == SQLITE_ROW) {
    if (count == capacity) {
      capacity *= 2;
      long long *grown = realloc(keys, capacity * sizeof *keys);
      if (!grown) { free(keys); rc = SQLITE_NOMEM; goto done; }
      keys = grown;
    }
    keys[count++] = sqlite3_column_int64(select, 0);
  }
  if (rc != SQLITE_DONE) { free(keys); goto done; }
  rc = SQLITE_OK;
  for (size_t i = 0; i < count && rc == SQLITE_OK; i++) {
    sqlite3_bind_int64(delete, 1, keys[i]);
    rc = sqlite3_step(delete) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_reset(delete);
    if (rc != SQLITE_OK) break;
    sqlite3_bind_int64(change, 1, token);
    sqlite3_bind_text(change, 2, table, -1, SQLITE_STATIC);
    sqlite3_bind_int64(change, 3, keys[i]);
    sqlite3_bind_int64(change, 4, 2);
    sqlite3_bind_null(change, 5);
    rc = sqlite3_step(change) == SQLITE_DONE ? SQLITE_OK : SQLITE_ERROR;
    sqlite3_reset(change);
  }
  free(keys);
done:
  sqlite3_finalize(select);
  sqlite3_finalize(delete);
  return rc;
}

int tb_rel_cascade(void *handle, long long owner, const char *author) {
  sqlite3 *db = handle;
  sqlite3_stmt *transaction = NULL, *change = NULL, *delete = NULL;
  int rc = sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return rc;
  rc = sqlite3_prepare_v2(db, "INSERT INTO _history_transactions (author, timestamp) VALUES (?, ?)",
                          -1, &transaction, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(db,
                            "INSERT INTO _history_changes (token, entity, pk, kind, attributes) "
                            "VALUES (?, ?, ?, ?, ?)",
                            -1, &change, NULL);
  if (rc == SQLITE_OK)
    rc = sqlite3_prepare_v2(db, "DELETE FROM \"owners\" WHERE \"_pk\" = ?", -1, &delete, NULL);
  if (rc != SQLITE_OK) goto done;
  sqlite3_bind_text(transaction, 1, author, -1, SQLITE_STATIC);
  sqlite3_bind_double(transaction, 2, now_reference_seconds());
  if ((rc = sqlite3_step(transaction)) != SQLITE_DONE) goto done;
  sqlite3_int64 token = sqlite3_last_insert_rowid(db);
  if ((rc = delete_children(db, "items", owner, change, token)) != SQLITE_OK) goto done;
  if ((rc = delete_children(db, "stays", owner, change, token)) != SQLITE_OK) goto done;
  sqlite3_bind_int64(delete, 1, owner);
  if ((rc = sqlite3_step(delete)) != SQLITE_DONE) goto done;
  sqlite3_bind_int64(change, 1, token);
  sqlite3_bind_text(change, 2, "owners", -1, SQLITE_STATIC);
  sqlite3_bind_int64(change, 3, owner);
  sqlite3_bind_int64(change, 4, 2);
  sqlite3_bind_null(change, 5);
  if ((rc = sqlite3_step(change)) != SQLITE_DONE) goto done;
  rc = SQLITE_OK;
done:
  sqlite3_finalize(transaction);
  sqlite3_finalize(change);
  sqlite3_finalize(delete);
  if (rc == SQLITE_OK) return sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
  sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

long tb_rel_items_of_owner_named(void *handle, const char *name, unsigned long long *checksum) {
  sqlite3 *db = handle;
  sqlite3_stmt *statement = NULL;
  if (sqlite3_prepare_v2(db,
                         "SELECT i.\"_pk\", i.\"title\", i.\"position\", i.\"owner\" FROM \"items\" AS i "
                         "JOIN \"owners\" AS o ON o.\"_pk\" = i.\"owner\" WHERE o.\"name\" = ? "
                         "ORDER BY i.\"_pk\"",
                         -1, &statement, NULL) != SQLITE_OK)
    return -1;
  sqlite3_bind_text(statement, 1, name, -1, SQLITE_STATIC);
  long count = 0;
  while (sqlite3_step(statement) == SQLITE_ROW) {
    item_row row = {sqlite3_column_int64(statement, 0), copy_text(statement, 1),
                    sqlite3_column_int64(statement, 2), sqlite3_column_int64(statement, 3)};
    *checksum += (unsigned long long)(row.position + 1);
    free(row.title);
    count++;
  }
  sqlite3_finalize(statement);
  return count;
}

/* The many-to-many baseline: groups and members linked through the join table the Swift layer
   keeps ("_m2m_members_groups": owner the member, target the group). */

typedef struct {
  long long group, member;
} link_row;

typedef struct {
  long long key;
  char *name;
  long long weight;
} member_row;

static int compare_links(const void *a, const void *b) {
  const link_row *x = a, *y = b;
  if (x->group != y->group) return x->group < y->group ? -1 : 1;
  return x->member < y->member ? -1 : x->member > y->member;
}

static int compare_keys(const void *a, const void *b) {
  long long x = *(const long long *)a, y = *(const long long *)b;
  return x < y ? -1 : x > y;
}

static long long find_member(const member_row *members, size_t count, long long key) {
  size_t low = 0, high = count;
  while (low < high) {
    size_t middle = (low + high) / 2;
    if (members[middle].key < key) low = middle + 1; else high = middle;
  }
  return low < count && members[low].key == key ? (long long)low : -1;
}

int tb_m2m_fetch(void *handle, unsigned long long *checksum) {
  sqlite3 *db = handle;
  sqlite3_stmt *statement = NULL;
  owner_row *groups = NULL;
  link_row *links = NULL;
  member_row *members = NULL;
  size_t group_count = 0, group_capacity = 1024, link_count = 0, link_capacity = 4096;
  size_t member_count = 0, member_capacity = 1024;
  char *keys = NULL, *member_keys = NULL;
  int rc = SQLITE_NOMEM;
  groups = malloc(group_capacity * sizeof *groups);
  links = malloc(link_capacity * sizeof *links);
  members = malloc(member_capacity * sizeof *members);
  if (!groups || !links || !members) goto done;
  rc = sqlite3_prepare_v2(db, "SELECT \"_pk\", \"name\" FROM \"m2m_groups\" ORDER BY \"_pk\"", -1,
                          &statement, NULL);
  if (rc != SQLITE_OK) goto done;
  while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
    if (group_count == group_capacity) {
      group_capacity *= 2;
      owner_row *grown = realloc(groups, group_capacity * sizeof *groups);
      if (!grown) { rc = SQLITE_NOMEM; goto done; }
      groups = grown;
    }
    groups[group_count++] = (owner_row){sqlite3_column_int64(statement, 0), copy_text(statement, 1), 0, 0, -1};
  }
  sqlite3_finalize(statement);
  statement = NULL;
  if (rc != SQLITE_DONE) goto done;
  /* The links of every group, one query over the join table's index on target. */
  keys = key_list(groups, group_count);
  if (!keys) { rc = SQLITE_NOMEM; goto done; }
  rc = sqlite3_prepare_v2(db,
                          "SELECT \"target\", \"owner\" FROM \"_m2m_members_groups\" WHERE \"target\" IN "
                          "(SELECT value FROM json_each(?))",
                          -1, &statement, NULL);
  if (rc != SQLITE_OK) goto done;
  sqlite3_bind_text(statement, 1, keys, -1, SQLITE_STATIC);
  while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
    if (link_count == link_capacity) {
      link_capacity *= 2;
      link_row *grown = realloc(links, link_capacity * sizeof *links);
      if (!grown) { rc = SQLITE_NOMEM; goto done; }
      links = grown;
    }
    links[link_count++] = (link_row){sqlite3_column_int64(statement, 0), sqlite3_column_int64(statement, 1)};
  }
  sqlite3_finalize(statement);
  statement = NULL;
  if (rc != SQLITE_DONE) goto done;
  /* The members linked, by primary key, in key order (each member once). */
  qsort(links, link_count, sizeof *links, compare_links);
  size_t capacity = link_count * 21 + 3, length = 0;
  member_keys = malloc(capacity);
  if (!member_keys) { rc = SQLITE_NOMEM; goto done; }
  length = 0;
  member_keys[length++] = '[';
  {
    long long *sorted = malloc((link_count + 1) * sizeof *sorted);
    if (!sorted) { rc = SQLITE_NOMEM; goto done; }
    for (size_t i = 0; i < link_count; i++) sorted[i] = links[i].member;
    qsort(sorted, link_count, sizeof *sorted, compare_keys);
    int first = 1;
    for (size_t i = 0; i < link_count; i++) {
      if (i > 0 && sorted[i] == sorted[i - 1]) continue;
      length += (size_t)snprintf(member_keys + length, capacity - length, first ? "%lld" : ",%lld", sorted[i]);
      first = 0;
    }
    free(sorted);
  }
  member_keys[length++] = ']';
  member_keys[length] = 0;
  rc = sqlite3_prepare_v2(db,
                          "SELECT \"_pk\", \"name\", \"weight\" FROM \"m2m_members\" WHERE \"_pk\" IN "
                          "(SELECT value FROM json_each(?)) ORDER BY \"_pk\"",
                          -1, &statement, NULL);
  if (rc != SQLITE_OK) goto done;
  sqlite3_bind_text(statement, 1, member_keys, -1, SQLITE_STATIC);
  while ((rc = sqlite3_step(statement)) == SQLITE_ROW) {
    if (member_count == member_capacity) {
      member_capacity *= 2;
      member_row *grown = realloc(members, member_capacity * sizeof *members);
      if (!grown) { rc = SQLITE_NOMEM; goto done; }
      members = grown;
    }
    members[member_count++] = (member_row){sqlite3_column_int64(statement, 0), copy_text(statement, 1),
                                           sqlite3_column_int64(statement, 2)};
  }
  sqlite3_finalize(statement);
  statement = NULL;
  if (rc != SQLITE_DONE) goto done;
  /* Each group's members in key order: the links sorted by (group, member). */
  unsigned long long sum = 0;
  size_t walk = 0;
  for (size_t g = 0; g < group_count; g++) {
    size_t count = 0;
    while (walk < link_count && links[walk].group < groups[g].key) walk++;
    while (walk < link_count && links[walk].group == groups[g].key) {
      long long index = find_member(members, member_count, links[walk].member);
      if (index >= 0) {
        count++;
        sum += (unsigned long long)members[index].weight * count;
      }
      walk++;
    }
    sum += (unsigned long long)(g + 1) * count;
  }
  *checksum = sum;
  rc = SQLITE_OK;
done:
  if (statement) sqlite3_finalize(statement);
  for (size_t i = 0; i < group_count; i++) free(groups[i].name);
  for (size_t i = 0; i < member_count; i++) free(members[i].name);
  free(groups);
  free(links);
  free(members);
  free(keys);
  free(member_keys);
  return rc == SQLITE_OK ? 0 : rc;
}
