/* The JSON type of a value, in words, for error messages. */
#ifndef PELOTON_UTIL_JSONTYPE_H
#define PELOTON_UTIL_JSONTYPE_H

#include <jansson.h>

static inline const char *json_type_name(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "object";
    case JSON_ARRAY: return "array";
    case JSON_STRING: return "string";
    case JSON_INTEGER: return "integer";
    case JSON_REAL: return "number";
    case JSON_TRUE:
    case JSON_FALSE: return "boolean";
    default: return "null";
    }
}

#endif
