#ifndef TRIPPLANNER_CPROJ_SHIM_H
#define TRIPPLANNER_CPROJ_SHIM_H
#include <proj.h>
#endif
