/* Kubernetes resource quantities, parsed and formatted exactly.
 *
 * Grammar (Kubernetes' resource.Quantity):
 *   quantity ::= [+-] number suffix
 *   number   ::= digits | digits "." [digits] | "." digits
 *   suffix   ::= "" | n u m k M G T P E | Ki Mi Gi Ti Pi Ei | (e|E) [+-] digits
 * The value is converted to the kind's base unit (milli for cpu and gpu, bytes
 * for memory and disk) and rounded up to a whole unit, as Kubernetes' MilliValue
 * and Value do ("0.1m" cpu is 1m; "0.5" bytes is 1). Negative values, values
 * above INT64_MAX base units, malformed text and text over QUANTITY_MAX_LEN are
 * refused with a message that quotes the input. No allocation. */
#ifndef PELOTON_CORE_QUANTITY_H
#define PELOTON_CORE_QUANTITY_H

#include <stddef.h>
#include <stdint.h>

#include "resource.h"

#define QUANTITY_MAX_LEN 128

/* Parses s (NUL-terminated) into units of 1/unit_per_one of the quantity:
 * unit_per_one is 1000 for milli-units, 1 for plain units. Returns 0, or
 * -EINVAL (malformed or negative) / -ERANGE (too large) with err filled. */
int quantity_parse(const char *s, int64_t unit_per_one, int64_t *out, char *err, size_t errlen);

/* Parses a quantity for a resource kind into its base unit. */
int quantity_parse_kind(enum res_kind k, const char *s, int64_t *out, char *err, size_t errlen);

/* Formats v (base units of kind k) as the shortest exact Kubernetes quantity:
 * cpu/gpu "2", "250m"; bytes "2Gi", "512M", "1000". RES_UNLIMITED formats as
 * "unlimited". Returns the length written (snprintf semantics). */
int quantity_format(enum res_kind k, int64_t v, char *buf, size_t len);

/* Formats v for a person to read, rounded (not a value to parse back):
 * cpu and gpu in units with at most two decimals ("2.67", "16", "0.5");
 * bytes in the largest binary unit that fits, with three significant digits
 * ("42.7Gi", "128Gi", "512Mi", "900"); RES_UNLIMITED as "unlimited".
 * Returns the length written (snprintf semantics). */
int quantity_format_display(enum res_kind k, int64_t v, char *buf, size_t len);

#endif
