// Regenerate the Keras-format JSON fixtures (topology only, no weights) with TensorFlow.js 4.22.
//
//   mkdir -p /tmp/tfjs && cd /tmp/tfjs && npm install @tensorflow/tfjs@4.22
//   NODE_PATH=/tmp/tfjs/node_modules node tests/data/import/make_keras.js [outdir]
//
// (or `npm install` next to this file's package.json; node_modules is not committed).
// Each file is exactly the string model.toJSON() returns: Keras' model_config JSON
// ({class_name, config, keras_version, backend}), as Keras' model.to_json() writes it.
// Layer names are given explicitly, as Python Keras would name them, so that reruns are identical.
'use strict';
const fs = require('fs');
const path = require('path');
const tf = require('@tensorflow/tfjs');

const outDir = process.argv[2] || __dirname;

// The project's default example (workloads/examples/mlp_mnist.json).
function mlp() {
  return tf.sequential({
    name: 'sequential',
    layers: [
      tf.layers.flatten({inputShape: [28, 28], name: 'flatten'}),
      tf.layers.dense({units: 128, activation: 'relu', name: 'dense'}),
      tf.layers.dense({units: 10, activation: 'softmax', name: 'dense_1'}),
    ],
  });
}

// A small functional model with branches: two residual blocks (the second with a strided
// 1x1 projection shortcut), batch norm, Add, global average pooling and a dense head.
function smallResnet() {
  const input = tf.input({shape: [32, 32, 3], name: 'input_1'});
  let x = tf.layers.conv2d({filters: 16, kernelSize: 3, padding: 'same', name: 'stem_conv'}).apply(input);
  x = tf.layers.batchNormalization({axis: 3, name: 'stem_bn'}).apply(x);
  x = tf.layers.activation({activation: 'relu', name: 'stem_relu'}).apply(x);
  function block(x, filters, stride, project, prefix) {
    let shortcut = x;
    if (project) {
      shortcut = tf.layers.conv2d({filters, kernelSize: 1, strides: stride, name: prefix + '_0_conv'}).apply(x);
      shortcut = tf.layers.batchNormalization({axis: 3, name: prefix + '_0_bn'}).apply(shortcut);
    }
    let y = tf.layers.conv2d({filters, kernelSize: 3, strides: stride, padding: 'same', name: prefix + '_1_conv'}).apply(x);
    y = tf.layers.batchNormalization({axis: 3, name: prefix + '_1_bn'}).apply(y);
    y = tf.layers.activation({activation: 'relu', name: prefix + '_1_relu'}).apply(y);
    y = tf.layers.conv2d({filters, kernelSize: 3, padding: 'same', name: prefix + '_2_conv'}).apply(y);
    y = tf.layers.batchNormalization({axis: 3, name: prefix + '_2_bn'}).apply(y);
    y = tf.layers.add({name: prefix + '_add'}).apply([shortcut, y]);
    return tf.layers.activation({activation: 'relu', name: prefix + '_out'}).apply(y);
  }
  x = block(x, 16, 1, false, 'block1');
  x = block(x, 32, 2, true, 'block2');
  x = tf.layers.globalAveragePooling2d({name: 'avg_pool'}).apply(x);
  x = tf.layers.dense({units: 10, activation: 'softmax', name: 'predictions'}).apply(x);
  return tf.model({inputs: input, outputs: x, name: 'small_resnet'});
}

// ResNet50 as keras.applications.resnet.ResNet50 builds it (v1, include_top, 224x224x3):
// same layer names, zero padding, conv biases, BN epsilon 1.001e-5.
function resnet50() {
  const bnEps = 1.001e-5;
  const conv = (x, filters, k, s, name, padding = 'valid') =>
    tf.layers.conv2d({filters, kernelSize: k, strides: s, padding, name}).apply(x);
  const bn = (x, name) => tf.layers.batchNormalization({axis: 3, epsilon: bnEps, name}).apply(x);
  const relu = (x, name) => tf.layers.activation({activation: 'relu', name}).apply(x);

  function block1(x, filters, stride, convShortcut, name) {
    let shortcut = x;
    if (convShortcut) {
      shortcut = conv(x, 4 * filters, 1, stride, name + '_0_conv');
      shortcut = bn(shortcut, name + '_0_bn');
    }
    x = conv(x, filters, 1, stride, name + '_1_conv');
    x = relu(bn(x, name + '_1_bn'), name + '_1_relu');
    x = conv(x, filters, 3, 1, name + '_2_conv', 'same');
    x = relu(bn(x, name + '_2_bn'), name + '_2_relu');
    x = conv(x, 4 * filters, 1, 1, name + '_3_conv');
    x = bn(x, name + '_3_bn');
    x = tf.layers.add({name: name + '_add'}).apply([shortcut, x]);
    return relu(x, name + '_out');
  }
  function stack1(x, filters, blocks, stride1, name) {
    x = block1(x, filters, stride1, true, name + '_block1');
    for (let i = 2; i <= blocks; i++) x = block1(x, filters, 1, false, name + '_block' + i);
    return x;
  }

  const input = tf.input({shape: [224, 224, 3], name: 'input_1'});
  let x = tf.layers.zeroPadding2d({padding: [[3, 3], [3, 3]], name: 'conv1_pad'}).apply(input);
  x = conv(x, 64, 7, 2, 'conv1_conv');
  x = relu(bn(x, 'conv1_bn'), 'conv1_relu');
  x = tf.layers.zeroPadding2d({padding: [[1, 1], [1, 1]], name: 'pool1_pad'}).apply(x);
  x = tf.layers.maxPooling2d({poolSize: 3, strides: 2, name: 'pool1_pool'}).apply(x);
  x = stack1(x, 64, 3, 1, 'conv2');
  x = stack1(x, 128, 4, 2, 'conv3');
  x = stack1(x, 256, 6, 2, 'conv4');
  x = stack1(x, 512, 3, 2, 'conv5');
  x = tf.layers.globalAveragePooling2d({name: 'avg_pool'}).apply(x);
  x = tf.layers.dense({units: 1000, activation: 'softmax', name: 'predictions'}).apply(x);
  return tf.model({inputs: input, outputs: x, name: 'resnet50'});
}

// Transfer learning as Keras users write it: a pretrained backbone nested in a Sequential with a
// new head, its stem and first block frozen and its last block fine-tuned. Python Keras's
// `backbone.trainable = False` sets trainable false on every layer inside, which is what each
// frozen layer's config records; tfjs sets it per layer here to the same effect.
function transfer() {
  const input = tf.input({shape: [32, 32, 3], name: 'image'});
  const frozen = [];
  const layer = (l, freeze) => {
    if (freeze) frozen.push(l);
    return l;
  };
  let x = layer(tf.layers.conv2d({filters: 16, kernelSize: 3, padding: 'same', name: 'stem_conv'}), true).apply(input);
  x = layer(tf.layers.batchNormalization({axis: 3, name: 'stem_bn'}), true).apply(x);
  x = layer(tf.layers.activation({activation: 'relu', name: 'stem_relu'}), true).apply(x);
  function block(x, filters, stride, prefix, freeze) {
    const shortcut = layer(tf.layers.conv2d({filters, kernelSize: 1, strides: stride, name: prefix + '_0_conv'}), freeze).apply(x);
    let y = layer(tf.layers.conv2d({filters, kernelSize: 3, strides: stride, padding: 'same', name: prefix + '_1_conv'}), freeze).apply(x);
    y = layer(tf.layers.batchNormalization({axis: 3, name: prefix + '_1_bn'}), freeze).apply(y);
    y = layer(tf.layers.activation({activation: 'relu', name: prefix + '_1_relu'}), freeze).apply(y);
    y = layer(tf.layers.conv2d({filters, kernelSize: 3, padding: 'same', name: prefix + '_2_conv'}), freeze).apply(y);
    y = layer(tf.layers.add({name: prefix + '_add'}), freeze).apply([shortcut, y]);
    return layer(tf.layers.activation({activation: 'relu', name: prefix + '_out'}), freeze).apply(y);
  }
  x = block(x, 16, 1, 'block1', true);
  x = block(x, 32, 2, 'block2', false);
  const backbone = tf.model({inputs: input, outputs: x, name: 'backbone'});
  for (const l of frozen) l.trainable = false;
  return tf.sequential({
    name: 'transfer',
    layers: [
      backbone,
      tf.layers.globalAveragePooling2d({name: 'avg_pool'}),
      tf.layers.dense({units: 10, activation: 'softmax', name: 'predictions'}),
    ],
  });
}

// keras.io's "Text classification from scratch" (F. Chollet, the IMDB review classifier): token
// ids of 500 steps, an embedding, two strided Conv1D, a global max pool and a dense head.
function textCnn() {
  const input = tf.input({shape: [500], dtype: 'int32', name: 'input_1'});
  let x = tf.layers.embedding({inputDim: 20000, outputDim: 128, name: 'embedding'}).apply(input);
  x = tf.layers.dropout({rate: 0.5, name: 'dropout'}).apply(x);
  x = tf.layers.conv1d({filters: 128, kernelSize: 7, padding: 'valid', activation: 'relu', strides: 3, name: 'conv1d'}).apply(x);
  x = tf.layers.conv1d({filters: 128, kernelSize: 7, padding: 'valid', activation: 'relu', strides: 3, name: 'conv1d_1'}).apply(x);
  x = tf.layers.globalMaxPooling1d({name: 'global_max_pooling1d'}).apply(x);
  x = tf.layers.dense({units: 128, activation: 'relu', name: 'dense'}).apply(x);
  x = tf.layers.dropout({rate: 0.5, name: 'dropout_1'}).apply(x);
  x = tf.layers.dense({units: 1, activation: 'sigmoid', name: 'predictions'}).apply(x);
  return tf.model({inputs: input, outputs: x, name: 'text_cnn'});
}

// keras.io's "Timeseries classification from scratch" (H. Ismail Fawaz's fully convolutional
// network on FordA): 500 steps of one reading, three Conv1D/BN/ReLU blocks, a global average pool.
function timeseriesFcn() {
  const input = tf.input({shape: [500, 1], name: 'input_1'});
  let x = input;
  for (const [i, suffix] of ['', '_1', '_2'].entries()) {
    x = tf.layers.conv1d({filters: 64, kernelSize: 3, padding: 'same', name: 'conv1d' + suffix}).apply(x);
    x = tf.layers.batchNormalization({name: 'batch_normalization' + suffix}).apply(x);
    x = tf.layers.reLU({name: 're_lu' + suffix}).apply(x);
  }
  x = tf.layers.globalAveragePooling1d({name: 'global_average_pooling1d'}).apply(x);
  x = tf.layers.dense({units: 2, activation: 'softmax', name: 'dense'}).apply(x);
  return tf.model({inputs: input, outputs: x, name: 'timeseries_fcn'});
}

// A temporal convolutional network in WaveNet's manner: dilated causal Conv1D (dilations 1, 2,
// 4), pooled along the steps. `causal` is the padding the causal layers get: tfjs 4.22 writes
// "causal" to the JSON but does not implement it (its convOutputLength takes it for "valid", its
// conv1d throws NotImplementedError), where Keras's conv_utils.conv_output_length gives causal
// the input's length, as "same" does; so the recorded shapes come from a twin built with "same".
function dilatedCausal(causal = 'causal') {
  const input = tf.input({shape: [256, 8], name: 'input_1'});
  let x = input;
  for (const d of [1, 2, 4])
    x = tf.layers.conv1d({filters: 32, kernelSize: 3, padding: causal, dilationRate: d, activation: 'relu', name: 'causal_d' + d}).apply(x);
  x = tf.layers.maxPooling1d({poolSize: 2, name: 'max_pool'}).apply(x);
  x = tf.layers.averagePooling1d({poolSize: 2, strides: 2, name: 'avg_pool'}).apply(x);
  x = tf.layers.conv1d({filters: 16, kernelSize: 5, strides: 2, padding: 'same', name: 'strided'}).apply(x);
  x = tf.layers.globalMaxPooling1d({name: 'global_max_pool'}).apply(x);
  x = tf.layers.dense({units: 10, activation: 'softmax', name: 'predictions'}).apply(x);
  return tf.model({inputs: input, outputs: x, name: 'dilated_causal'});
}

// Inception v3's factorized 7x7 (a 1x7 then a 7x1 convolution), a dilated 3x3 and a 3x1 pool, on
// a small image.
function factorized() {
  const input = tf.input({shape: [17, 17, 32], name: 'input_1'});
  let x = tf.layers.conv2d({filters: 48, kernelSize: [1, 7], padding: 'same', activation: 'relu', name: 'conv_1x7'}).apply(input);
  x = tf.layers.conv2d({filters: 64, kernelSize: [7, 1], padding: 'same', activation: 'relu', name: 'conv_7x1'}).apply(x);
  x = tf.layers.conv2d({filters: 64, kernelSize: 3, dilationRate: 2, padding: 'valid', name: 'atrous'}).apply(x);
  x = tf.layers.maxPooling2d({poolSize: [3, 1], strides: [2, 1], name: 'pool_3x1'}).apply(x);
  x = tf.layers.globalMaxPooling2d({name: 'global_max_pool'}).apply(x);
  x = tf.layers.dense({units: 10, activation: 'softmax', name: 'predictions'}).apply(x);
  return tf.model({inputs: input, outputs: x, name: 'factorized'});
}

// A CRNN's front (Keras's OCR example's shape: image width as time): convolutions over a 32x128
// text line, Permute to put the width first, Reshape to [128 steps, height x channels], then a
// dense projection and a Conv1D over the steps in place of the recurrent layers. (Keras's -1 in
// target_shape, [128, -1], makes tfjs 4.22 fail to size the dense layer: the test writes it.)
function crnn() {
  const input = tf.input({shape: [32, 128, 1], name: 'image'});
  let x = tf.layers.conv2d({filters: 16, kernelSize: 3, padding: 'same', activation: 'relu', name: 'conv1'}).apply(input);
  x = tf.layers.maxPooling2d({poolSize: [2, 1], name: 'pool1'}).apply(x);
  x = tf.layers.permute({dims: [2, 1, 3], name: 'width_first'}).apply(x);
  x = tf.layers.reshape({targetShape: [128, 256], name: 'to_sequence'}).apply(x);
  x = tf.layers.dense({units: 64, activation: 'relu', name: 'project'}).apply(x);
  x = tf.layers.conv1d({filters: 64, kernelSize: 3, padding: 'same', activation: 'relu', name: 'context'}).apply(x);
  x = tf.layers.globalAveragePooling1d({name: 'pool'}).apply(x);
  x = tf.layers.dense({units: 10, activation: 'softmax', name: 'predictions'}).apply(x);
  return tf.model({inputs: input, outputs: x, name: 'crnn'});
}

const builders = {mlp_mnist: mlp, small_resnet: smallResnet, resnet50: resnet50, transfer: transfer, text_cnn: textCnn,
                  timeseries_fcn: timeseriesFcn, dilated_causal: dilatedCausal, factorized: factorized, crnn: crnn};
const SHAPES_CHECKED = new Set(['text_cnn', 'timeseries_fcn', 'dilated_causal', 'factorized', 'crnn']);
const summary = {tfjs: tf.version.tfjs, models: {}};
for (const [name, build] of Object.entries(builders)) {
  const t0 = Date.now();
  const model = build();
  const json = model.toJSON();  // a string: the topology only, no weights
  const file = path.join(outDir, 'keras_' + name + '.json');
  fs.writeFileSync(file, json);
  const trainable = model.trainableWeights.reduce((n, w) => n + w.shape.reduce((a, b) => a * b, 1), 0);
  summary.models[name] = {
    file: path.basename(file),
    bytes: Buffer.byteLength(json),
    layers: model.layers.length,
    params: model.countParams(),
    trainable_params: trainable,
    input_shape: model.inputs[0].shape,
    output_shape: model.outputs[0].shape,
  };
  // Each layer's output shape, for the models whose windows (1D, non-square, dilated, causal)
  // the importer's shape inference is checked against.
  if (SHAPES_CHECKED.has(name)) {
    const twin = name === 'dilated_causal' ? dilatedCausal('same') : model;
    summary.models[name].layer_output_shapes = Object.fromEntries(twin.layers.map((l) => [l.name, l.outputShape]));
  }
  console.log(name, JSON.stringify(summary.models[name]), (Date.now() - t0) + ' ms');
  model.dispose();
}
fs.writeFileSync(path.join(outDir, 'keras_summary.json'), JSON.stringify(summary, null, 1) + '\n');
