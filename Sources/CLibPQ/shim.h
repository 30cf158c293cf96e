#ifndef TRIPPLANNER_CLIBPQ_SHIM_H
#define TRIPPLANNER_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
