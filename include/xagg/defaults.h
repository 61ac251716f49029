/* SPDX-License-Identifier: MIT */
/* Where xaggd and its clients meet unless configured otherwise: one definition for the daemon's
 * config, xaggctl, the client library (a public header includes it) and the API. */
#ifndef XAGG_DEFAULTS_H
#define XAGG_DEFAULTS_H

/* The control API's Unix socket (control_socket); its directory is the unit's RuntimeDirectory. */
#define XAGG_DEFAULT_CONTROL_SOCKET "/run/xagg/xaggd.sock"

#endif /* XAGG_DEFAULTS_H */
